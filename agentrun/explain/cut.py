"""Where a fork goes on from, and which of its parent's recorded steps it takes over.

The parent's step log holds every finished run of a step in the order they finished, each with how
many had finished when it began. A fork at step S takes over every recorded run that began before
S's run ended in the parent, S's own excepted: such a run could not have read S's output, nor
anything made from it. In a language that runs one step at a time that is every step before S, in
the order the parent ran them (earlier rounds of S's loop included); beside it, the other branches
of a parallel step and the other elements of a map that had finished.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import NoReturn

from agentrun import spelling
from agentrun.ids import NodeId
from agentrun.lang import ir
from agentrun.lang.errors import Problem, SpecError, did_you_mean
from agentrun.models.contract import RunState, StepRecord

FAILURE = "failure"  # --at failure: the step whose failure ended the run
_AT = re.compile(r"(?P<node>.+?)(?P<elements>(?:\[\d+\])*)(?:#(?P<round>\d+))?")


@dataclass(frozen=True)
class Cut:
    at: str  # where the fork goes on, as its report says it
    reuse: list[StepRecord]
    notes: list[str] = field(default_factory=list)  # why it goes on earlier than asked


def choose(plan: ir.Plan, state: RunState, at: str) -> Cut:
    """The cut `--at` names in the run `state` of `plan`. Raises SpecError."""
    log = state.step_log
    if not log:
        _refuse(
            f"run {state.run_id} has no recorded step to take over: no step finished, or it ran on an "
            "engine that did not record them",
            f"start it again with `{spelling.client()} start {plan.source}`",
        )
    chosen, label = _failure(state) if at == FAILURE else _named(plan, log, state.run_id, at)
    return _taken_over(log, chosen, label)


def step_id(plan: ir.Plan, name: str, flag: str = "--at") -> NodeId:
    """The id of the step `name` stands for: a step's id, the last part of a dotted or slashed id
    (`install` for `setup.install`), or a behaviour tree's action (its first step). Raises SpecError."""
    ids = [NodeId(leaf.id) for leaf in plan.leaves()]
    if name in ids:
        return NodeId(name)
    matches = [i for i in ids if _short(i) == name]
    bases = list(dict.fromkeys(re.sub(r"@\d+$", "", i) for i in matches))
    if len(bases) == 1:
        return matches[0]
    if bases:
        _refuse(f"step name '{name}' is ambiguous in {plan.name}", "name one of: " + ", ".join(matches), flag)
    hint = did_you_mean(name, ids + [_short(i) for i in ids]) or "its steps: " + ", ".join(ids)
    _refuse(f"no step '{name}' in {plan.name}", hint, flag)


def _short(step: str) -> str:
    return re.sub(r"@\d+$", "", re.split(r"[./]", step)[-1])


def _failure(state: RunState) -> tuple[list[int], str]:
    """The run of the step that failed the run; after retries, the first of the attempts that
    failed in a row, so the fork gets them all again."""
    if state.status != "failed":
        _refuse(
            f"run {state.run_id} did not fail (it is {state.status})",
            "name the step to fork from: --at STEP",
        )
    log = state.step_log
    failed = [i for i, r in enumerate(log) if r.status == "failed"]
    if not failed:
        _refuse(
            f"run {state.run_id} failed outside any step ({state.last_error or 'no error recorded'})",
            "name the step to fork from: --at STEP",
        )
    last = log[failed[-1]]
    rounds = {r.round: i for i, r in enumerate(log) if r.key == last.key}
    first = last.round
    while first - 1 in rounds and log[rounds[first - 1]].status == "failed":
        first -= 1
    return [rounds[first]], _label(last.key, first)


def _named(plan: ir.Plan, log: list[StepRecord], run_id: str, at: str) -> tuple[list[int], str]:
    """Every run of the step `at` names: of each of its map elements unless one is named, in its
    first round unless `#N` names another."""
    parsed = _AT.fullmatch(at)
    assert parsed is not None  # the pattern takes any text of one character or more
    node = step_id(plan, parsed["node"])
    elements, turn = parsed["elements"], int(parsed["round"] or 1)
    chosen = [
        i
        for i, r in enumerate(log)
        if r.node == node and (not elements or r.key == node + elements) and r.round == turn
    ]
    if not chosen:
        ran = list(dict.fromkeys(r.node for r in log))
        what = f"'{node + elements}'" + (f" round {turn}" if turn > 1 else "")
        _refuse(f"step {what} did not run in {run_id}", "steps that ran: " + ", ".join(ran))
    key = log[chosen[0]].key if elements else node
    return chosen, _label(key, turn)


def _taken_over(log: list[StepRecord], chosen: list[int], label: str) -> Cut:
    """The records that began before the first chosen one ended, the chosen excepted; a record whose
    value was too large to keep moves the cut back to it."""
    notes = []
    while True:
        end = min(chosen)
        reuse = [i for i, r in enumerate(log) if i not in chosen and r.began <= end]
        lost = next((i for i in reuse if not log[i].kept), None)
        if lost is None:
            return Cut(label, [log[i] for i in reuse], notes)
        record = log[lost]
        label = _label(record.key, record.round)
        notes.append(f"the output of {label} was too large to keep, so the fork goes on from it")
        chosen = [*chosen, lost]


def _label(key: str, turn: int) -> str:
    return key if turn == 1 else f"{key}#{turn}"


def _refuse(message: str, hint: str, flag: str = "--at") -> NoReturn:
    raise SpecError([Problem(flag, 0, 0, message, hint)])
