"""Questions to people: a gate opens in the run state, the run waits durably (a timer at most, no
activity held open), and an update answers it. The update handlers live on the workflow; their
bodies are here.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow

from agentrun.ids import GateId
from agentrun.lang import ir
from agentrun.models.contract import Answer, AnswerInput, Gate, GateKind, RunState, ToolAsk
from agentrun.workflows import metrics, tracing


class GateTimedOut(Exception):
    def __init__(self, gate: str, message: str):
        super().__init__(message)
        self.gate, self.message = gate, message


class Humans:
    def __init__(self, state: RunState, changed: Callable[[], None]):
        self.state, self.changed = state, changed

    async def ask(self, node: ir.Human, guards: str, prompt: str) -> Answer:
        """Open the gate, wait for its answer or its timeout; `on_timeout` decides what a timeout means."""
        kind: GateKind = "approval" if node.approval else "question"
        gate = self._open(node.id, kind, prompt, node.choices, guards, node.timeout_s)
        with tracing.gate_wait(gate):
            try:
                await workflow.wait_condition(
                    lambda: gate.status != "open", timeout=node.timeout_s, timeout_summary=f"{gate.id}: answer timeout"
                )
            except TimeoutError:
                self._timed_out(gate, node)
            finally:
                self.changed()
        assert gate.answer is not None  # an answer, or the timeout's, closed it
        return gate.answer

    async def pause(self, gate_id: str, message: str) -> bool:
        """A budget ran out: wait until a person raises it (True) or rejects going on (False)."""
        gate = self._open(gate_id, "budget", message, [], gate_id, None)
        with tracing.gate_wait(gate):
            try:
                await workflow.wait_condition(lambda: gate.status != "open")
            finally:
                self.changed()
        return gate.answer is not None and gate.answer.value != ir.REJECT

    async def approve_call(self, gate_id: str, prompt: str, call: ToolAsk, timeout_s: float | None) -> Answer | None:
        """A tool call's gate (the policy's `ask`): open it, wait for approve, reject or
        approve-pattern; None when its timeout passed first (the call is then rejected)."""
        choices = [ir.APPROVE, ir.REJECT, ir.APPROVE_PATTERN]
        gate = self._open(gate_id, "approval", prompt, choices, call.step, timeout_s, call)
        with tracing.gate_wait(gate):
            try:
                await workflow.wait_condition(
                    lambda: gate.status != "open",
                    timeout=timeout_s,
                    timeout_summary=f"{gate.id}: approval of {call.tool} times out",
                )
            except TimeoutError:
                self.state.time_out_gate(gate.id, ir.REJECT, workflow.now())
                return None
            finally:
                self.changed()
        return gate.answer

    def answer(self, given: AnswerInput) -> Answer:
        """The update's effect; its validator has already refused what cannot be taken."""
        return self.close(given.gate, given.value, given.comment, given.by)

    def close(self, gate_id: GateId, value: str, comment: str = "", by: str = "") -> Answer:
        return self.state.answer_gate(gate_id, Answer(value=value, comment=comment, by=by, at=workflow.now()))

    def _open(
        self,
        gate_id: str,
        kind: GateKind,
        prompt: str,
        choices: list[str],
        guards: str,
        timeout_s: float | None,
        call: ToolAsk | None = None,
    ) -> Gate:
        key = _fresh(self.state, gate_id)
        now = workflow.now()
        gate = Gate(
            id=key,
            name=gate_id,
            kind=kind,
            prompt=prompt,
            choices=choices,
            node=guards,
            opened_at=now,
            timeout_at=now + timedelta(seconds=timeout_s) if timeout_s else None,
            call=call,
        )
        self.state.open_gate(gate)
        workflow.set_current_details(f"Waiting for a person: **{key}** — {prompt.splitlines()[0] if prompt else ''}")
        self.changed()
        return gate

    def _timed_out(self, gate: Gate, node: ir.Human) -> None:
        waited = f"no answer to gate '{gate.id}' within {node.timeout_s:g}s"
        if node.on_timeout == "fail":
            metrics.failed("gate_timeout")
            self.state.time_out_gate(gate.id, None, workflow.now())
            raise GateTimedOut(gate.id, waited)
        value = None if node.on_timeout == "continue" else node.on_timeout
        self.state.time_out_gate(gate.id, value, workflow.now())
        self.state.hear(node.id, value)
        self.state.warn(f"{gate.id}: {waited}; " + ("going on without one" if value is None else f"taking '{value}'"))


def _fresh(state: RunState, gate_id: str) -> GateId:
    """A gate asked again (a loop round, a raised budget running out again) gets a new key: id#2, id#3."""
    asked = sum(1 for gate in state.gates.values() if gate.name == gate_id)
    return GateId(f"{gate_id}#{asked + 1}" if asked else gate_id)


def rejected(gate_id: str, answer: Answer) -> str:
    who = f" by {answer.by}" if answer.by else ""
    why = f": {answer.comment}" if answer.comment else ""
    return f"rejected at gate '{gate_id}'{who}{why}"
