"""A behaviour tree's steps: an `evaluate` the agent judges true or false, an `instruct` it does and
reports as success, failure or running. The engine asks its agent; in a driven run the agent asks
the run instead (`workflows.driven`) and its answers arrive as updates. Either way each answer is
recorded in the run's trace and its $VAR writes go to the blackboard (the run's memory)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from temporalio import workflow

from agentrun.lang import blackboard, ir
from agentrun.lang.render import clip
from agentrun.models.contract import TraceEntry
from agentrun.models.texts import tree_text
from agentrun.models.texts.tree_text import BadAnswer, Outcome, Verdict
from agentrun.workflows.failures import TaskFailed

if TYPE_CHECKING:
    from agentrun.models.contract import TaskState
    from agentrun.workflows.runtime import Runtime
    from agentrun.workflows.scope import Scope

NOTE_CHARS = 2_000
DETAILS_CHARS = 1_500


class TreeProtocol:
    async def perform(
        self, engine: Runtime, node: ir.Task, scope: Scope, task: TaskState, retry_error: str | None
    ) -> Any:
        step = node.tree_step
        assert step is not None
        workflow.set_current_details(details(engine, node))
        if engine.driven is not None:
            answer = await engine.driven.ask(node, str(scope.key))
        else:
            answer = await _asked(engine, node, scope, task)
        return settled(str(scope.key), answer)


def details(engine: Runtime, node: ir.Task) -> str:
    """What Temporal Web shows while a step runs: where the tree is, and its blackboard."""
    step = node.tree_step
    assert step is not None
    board = json.dumps(engine.state.memory, ensure_ascii=False, default=str)
    return f"**{step.action}**: {node.protocol} step {step.index + 1}\n\n$VAR: `{clip(board, DETAILS_CHARS)}`"


async def _asked(engine: Runtime, node: ir.Task, scope: Scope, task: TaskState) -> Verdict | Outcome:
    """The agent's answer to the step; an instruct answered `running` is asked again after a
    durable wait, the wait doubling up to the plan's limit, until it is finished or out of asks."""
    pace, key = engine.inp.plan.running, str(scope.key)
    for ask in range(1, pace.max_asks + 1):
        task.asked(ask)
        answer = await _one_answer(engine, node, scope, ask)
        refusal = _write_vars(engine, key, answer.var) if isinstance(answer, Outcome) else None
        engine.state.add_trace(record(node, answer, "write_refused" if refusal else None))
        if refusal:
            raise TaskFailed(key, f"write refused: {refusal}")
        if isinstance(answer, Verdict) or answer.status != "running":
            return answer
        if ask < pace.max_asks:
            wait = min(pace.wait_s * 2 ** (ask - 1), pace.max_wait_s)
            workflow.set_current_details(f"**{node.label}**: running; asking again in {wait:g}s")
            await workflow.sleep(timedelta(seconds=wait), summary=f"{node.label}: running, ask again")
    raise TaskFailed(key, f"still running after {pace.max_asks} asks")


async def _one_answer(engine: Runtime, node: ir.Task, scope: Scope, ask: int) -> Verdict | Outcome:
    """One reading of the agent's reply; a reply that is not the step's JSON gets one reminder."""
    values = {**engine.state.memory}
    text = tree_text.step_prompt(node, values, engine.inp.plan.constants, ask)
    reply = await engine.conversation.ask(node, scope, text, phase=f"{node.protocol} (ask {ask})" if ask > 1 else None)
    try:
        return _read(node, reply)
    except BadAnswer as exc:
        again = await engine.conversation.ask(node, scope, tree_text.reminder(node.protocol, str(exc)), phase="format")
    try:
        return _read(node, again)
    except BadAnswer as exc:
        raise TaskFailed(str(scope.key), f"the reply is not the step's JSON answer, twice: {exc}") from None


def _read(node: ir.Task, reply: str) -> Verdict | Outcome:
    if node.protocol == "evaluate":
        return tree_text.read_verdict(reply)
    return tree_text.read_outcome(reply)


def settled(key: str, answer: Verdict | Outcome) -> bool | str:
    """The step's value once answered: True for a precondition met, "success" for work done;
    a precondition not met or work failed fails the step, and so its action."""
    because = f": {answer.note}" if answer.note else ""
    if isinstance(answer, Verdict):
        if not answer.result:
            raise TaskFailed(key, "precondition not met" + because)
        return True
    if answer.status == "failure":
        raise TaskFailed(key, "the agent reported failure" + because)
    return answer.status


def outcome_of(status: str, last: bool) -> str:
    """What a submitted status does, in the words a behaviour tree's trace uses."""
    if status == "running":
        return "running"
    if status == "failure":
        return "action_failed"
    return "action_complete" if last else "step_complete"


def record(node: ir.Task, answer: Verdict | Outcome, outcome: str | None = None) -> TraceEntry:
    """The agent's answer to a step, as the run's trace keeps it."""
    step = node.tree_step
    assert step is not None
    if isinstance(answer, Verdict):
        submitted = str(answer.result).lower()
        outcome = "evaluation_passed" if answer.result else "evaluation_failed"
    else:
        submitted, outcome = answer.status, outcome or outcome_of(answer.status, step.last)
    return TraceEntry(
        ts=workflow.now(),
        kind=node.protocol,
        cursor=step.cursor,
        name=step.action,
        submitted=submitted,
        outcome=outcome,
        note=clip(answer.note, NOTE_CHARS),
    )


def _write_vars(engine: Runtime, key: str, writes: dict[str, Any]) -> str | None:
    """Put an answer's $VAR writes on the blackboard, and in the record of the step `key` a fork
    takes over; why not, if one names a constant (then none of them is made)."""
    constants = engine.inp.plan.constants
    for name in writes:
        refusal = blackboard.const_refusal(name, constants)
        if refusal:
            return refusal
    for name, value in writes.items():
        engine.state.write_var(blackboard.var_path(name), value)
        engine.reuse.wrote(key, blackboard.var_path(name), value)
    return None


TREE = TreeProtocol()
