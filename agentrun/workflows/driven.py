"""A driven run: the agent walks a behaviour tree itself, through MCP tools, instead of being asked.

The interpreter walks the tree as in any run; where it would prompt the agent for a step it waits
here instead, until the agent asks for the step (`next_step`) and answers it (`eval`, `submit`).
Every answer is an update, so the run's history holds the whole exchange and the phase machine
lives in the run: the MCP server in front of it keeps nothing. Steps waiting at the same time (the
branches of a parallel node) are handed out one at a time, in the tree's order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from temporalio import workflow

from agentrun.lang import ir
from agentrun.lang.blackboard import const_refusal, var_path
from agentrun.lang.render import clip
from agentrun.models.contract import EvalInput, RunState, SubmitInput, TraceEntry, open_gates
from agentrun.models.driven import EvaluateStep, Finished, InstructStep, NextStep, Recorded, Said, VarWritten
from agentrun.models.texts.tree_text import Outcome, Verdict
from agentrun.workflows.protocols.tree import NOTE_CHARS, outcome_of

PROTOCOL_STEP = "Acknowledge_Protocol"
PROTOCOL_TEXT = """\
This execution is a behaviour tree that the runtime walks and you work through, one step at a time.

- Call next_step to get your next step. It is an `evaluate` (a precondition: judge it, then call
  eval with true or false) or an `instruct` (work to do: do it, then call submit with success,
  failure, or running when it is not finished yet). next_step answers {status: "done"} or
  {status: "failure"} when the tree has finished.
- The runtime decides which step comes next; do not skip ahead or repeat steps yourself.
- Read $VAR and $CONST values with var_read and const_read, never from memory of earlier calls,
  and store results with var_write. $CONST values cannot be written.
- Give each answer a short note naming the values that decided it; use think to record reasoning.

Submit success to accept this protocol and begin, or failure to abort the execution."""

_MESSAGES = {
    "evaluation_passed": "Precondition met. Advancing.",
    "evaluation_failed": "Precondition not met. Action failed.",
    "step_complete": "Step done. More steps remain.",
    "action_complete": "All steps done. Action succeeded.",
    "action_failed": "Instruction failed. Action marked as failure.",
    "running": "Acknowledged. Call next_step when ready to continue.",
    "protocol_accepted": "Protocol acknowledged. Call next_step to begin the tree.",
    "protocol_rejected": "Protocol not acknowledged. Execution aborted.",
}


@dataclass
class _Waiting:
    node: ir.Task
    answer: asyncio.Future[Verdict | Outcome]


class Driven:
    def __init__(self, state: RunState, constants: dict[str, Any], changed: Callable[[], None]):
        self.state, self.drive, self.constants, self.changed = state, state.start_drive(), constants, changed
        self.waiting: dict[str, _Waiting] = {}  # run key -> the step the run waits on

    async def accepted(self) -> bool:
        """Wait until the agent has accepted the protocol (True) or refused it (False)."""
        await workflow.wait_condition(lambda: self.drive.protocol_accepted or self.drive.protocol_rejected)
        return self.drive.protocol_accepted

    async def ask(self, node: ir.Task, key: str) -> Verdict | Outcome:
        """The agent's answer to the step `node`, run as `key`, once it has asked for it and answered."""
        waiting = _Waiting(node, asyncio.get_running_loop().create_future())
        self.waiting[key] = waiting
        workflow.set_current_details(f"Waiting for the agent to ask for **{node.label}** (next_step)")
        try:
            return await waiting.answer
        finally:
            del self.waiting[key]
            if self.drive.current == key:  # cancelled while handed out: nothing is asked any more
                self._idle()

    def finish(self, outcome: str) -> None:
        self.drive.finish(outcome)

    # ------------------------------------------------------------------ the agent's calls

    async def next_step(self) -> NextStep:
        drive = self.drive
        if drive.finished:
            return Finished(status=drive.finished)
        if not drive.protocol_accepted:
            if drive.protocol_rejected:
                return Finished(status="failure")
            drive.offer_protocol()
            return InstructStep(name=PROTOCOL_STEP, instruction=PROTOCOL_TEXT)
        if drive.current is not None:
            return request(self.waiting[drive.current].node)  # asked again before an answer
        await workflow.wait_condition(
            lambda: bool(self.waiting) or bool(drive.finished) or bool(open_gates(self.state))
        )
        if drive.finished:
            return Finished(status=drive.finished)
        if not self.waiting:
            return _waiting_for_people(self.state)
        key = min(self.waiting, key=lambda k: _order(self.waiting[k].node))
        node = self.waiting[key].node
        step = node.tree_step
        assert step is not None
        drive.hand_out(key, step.cursor, "evaluating" if node.protocol == "evaluate" else "performing")
        workflow.set_current_details(f"The agent works on **{node.label}**")
        self.changed()
        return request(node)

    def eval_refusal(self) -> str | None:
        if self.drive.phase != "evaluating":
            return f"Execution is not in evaluating phase (current: {self.drive.phase})"
        return None

    def submit_refusal(self) -> str | None:
        if self.drive.phase not in ("performing", "protocol"):
            return f"Execution is not in performing phase (current: {self.drive.phase})"
        return None

    def eval(self, given: EvalInput) -> Said:
        waiting = self._current()
        outcome = "evaluation_passed" if given.result else "evaluation_failed"
        self._trace(waiting.node, "evaluate", str(given.result).lower(), outcome, given.note)
        waiting.answer.set_result(Verdict(given.result, given.note))
        self._idle()
        return _said(outcome)

    def submit(self, given: SubmitInput) -> Said:
        if self.drive.phase == "protocol":
            return self._protocol(given)
        waiting = self._current()
        step = waiting.node.tree_step
        assert step is not None
        outcome = outcome_of(given.status, step.last)
        self._trace(waiting.node, "instruct", given.status, outcome, given.note)
        if given.status != "running":
            waiting.answer.set_result(Outcome(given.status, {}, given.note))
            self._idle()
        return _said(outcome)

    def think(self, thought: str) -> Recorded:
        self.state.add_trace(self._entry("think", self._name(), thought, "recorded", ""))
        return Recorded()

    def var_refusal(self, path: str) -> str | None:
        return const_refusal(path, self.constants)

    def var_write(self, path: str, value: Any) -> VarWritten:
        self.state.write_var(var_path(path), value)
        self.changed()
        return VarWritten(path=var_path(path), value=value)

    # ------------------------------------------------------------------ bookkeeping

    def _protocol(self, given: SubmitInput) -> Said:
        outcome = {"success": "protocol_accepted", "failure": "protocol_rejected"}.get(given.status, "running")
        submitted = {"success": "accept", "failure": "reject"}.get(given.status, "running")
        self.state.add_trace(self._entry("protocol", PROTOCOL_STEP, submitted, outcome, given.note))
        if given.status != "running":
            self.drive.settle_protocol(given.status)
            self._idle()
        return _said(outcome)

    def _current(self) -> _Waiting:
        assert self.drive.current is not None
        return self.waiting[self.drive.current]

    def _idle(self) -> None:
        self.drive.idle()
        self.changed()

    def _name(self) -> str:
        if self.drive.current is None or self.drive.current not in self.waiting:
            return PROTOCOL_STEP if self.drive.phase == "protocol" else ""
        step = self.waiting[self.drive.current].node.tree_step
        return step.action if step else ""

    def _trace(self, node: ir.Task, kind: str, submitted: str, outcome: str, note: str) -> None:
        step = node.tree_step
        assert step is not None
        self.state.add_trace(self._entry(kind, step.action, submitted, outcome, note))

    def _entry(self, kind: str, name: str, submitted: str, outcome: str, note: str) -> TraceEntry:
        return TraceEntry(
            ts=workflow.now(),
            kind=kind,
            cursor=self.drive.cursor,
            name=name,
            submitted=clip(submitted, NOTE_CHARS),
            outcome=outcome,
            note=clip(note, NOTE_CHARS),
        )


def request(node: ir.Task) -> EvaluateStep | InstructStep:
    """A step as next_step hands it out."""
    step = node.tree_step
    assert step is not None
    if node.protocol == "evaluate":
        return EvaluateStep(name=step.action, expression=node.prompt)
    return InstructStep(name=step.action, instruction=node.prompt)


def _order(node: ir.Task) -> tuple[int, ...]:
    step = node.tree_step
    assert step is not None
    return (*step.path, step.index)


def _said(outcome: str) -> Said:
    return Said(status=outcome, message=_MESSAGES[outcome])


def _waiting_for_people(state: RunState) -> Said:
    gates = ", ".join(gate.id for gate in open_gates(state))
    return Said(
        status="waiting",
        message=f"The run waits for a person at gate {gates}; call next_step again once it is answered.",
    )
