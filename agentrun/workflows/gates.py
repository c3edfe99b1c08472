"""How people talk to a run: the updates it accepts, and why it refuses one.

The refusals are pure functions of the run state, so the workflow's update validators and the
tests share them. A refused update is rejected before it is accepted: nothing reaches history.
"""

from __future__ import annotations

from agentrun.lang.ir import REJECT
from agentrun.models.contract import AnswerInput, BudgetInput, Gate, RunState, dollars, open_gates


def answer_refusal(state: RunState, answer: AnswerInput) -> str | None:
    """Why this answer cannot be taken, or None."""
    gate = state.gates.get(answer.gate)
    if gate is None:
        return _unknown(state, answer.gate)
    if gate.status != "open":
        return _closed(gate)
    if gate.kind == "budget":
        if answer.value == REJECT:
            return None
        return (
            f"gate '{gate.id}' is a paused budget: raise it with `python -m client budget {state.run_id} "
            f"--gate {gate.id} --tokens N` (or --usd X), or end the run with `reject`"
        )
    if gate.call is not None and answer.digest and answer.digest != gate.call.digest:
        return (
            f"gate '{gate.id}' asks about {gate.call.tool} with other arguments than the ones approved "
            f"(digest {gate.call.digest[:12]}, not {answer.digest[:12]}): look at the call again"
        )
    if gate.choices and answer.value not in gate.choices:
        return f"'{answer.value}' is not an answer to gate '{gate.id}': choose one of {', '.join(gate.choices)}"
    if not answer.value.strip():
        return f"the answer to gate '{gate.id}' is empty"
    return None


def budget_refusal(state: RunState, raised: BudgetInput) -> str | None:
    gate = state.gates.get(raised.gate)
    if gate is None or gate.kind != "budget":
        paused = [g.id for g in open_gates(state) if g.kind == "budget"]
        where = f"; paused: {', '.join(paused)}" if paused else "; its budget is not paused"
        return f"run {state.run_id} has no paused budget '{raised.gate}'{where}"
    if gate.status != "open":
        return _closed(gate)
    if raised.tokens is None and raised.usd is None and raised.iterations is None:
        return "say how far to raise the budget: --tokens N, --usd X and/or --iterations N"
    if raised.iterations is not None and raised.iterations <= state.iteration_count:
        return f"{raised.iterations} prompts is not above the {state.iteration_count} already sent"
    if raised.tokens is not None and raised.tokens <= state.total_tokens_used:
        return f"{raised.tokens} tokens is not above the {state.total_tokens_used} already used"
    if raised.usd is not None and raised.usd <= state.total_cost_usd:
        return f"{dollars(raised.usd)} is not above the {dollars(state.total_cost_usd)} already spent"
    return None


def _unknown(state: RunState, gate_id: str) -> str:
    waiting = [g.id for g in open_gates(state)]
    where = f"open: {', '.join(waiting)}" if waiting else "it is not waiting for anyone"
    return f"run {state.run_id} has no open gate '{gate_id}' ({where})"


def _closed(gate: Gate) -> str:
    if gate.status == "timed_out":
        return (
            f"gate '{gate.id}' timed out at {gate.answer.at:%Y-%m-%d %H:%M:%S} UTC"
            if gate.answer
            else f"gate '{gate.id}' timed out"
        )
    answer = gate.answer
    who = f" by {answer.by}" if answer and answer.by else ""
    when = f" at {answer.at:%Y-%m-%d %H:%M:%S} UTC" if answer else ""
    return f"gate '{gate.id}' was already answered ({answer.value if answer else ''}){who}{when}"
