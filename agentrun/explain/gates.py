"""A run's open gates as people read them: the answers a gate takes and the command that gives one."""

from __future__ import annotations

from agentrun import spelling
from agentrun.lang.ir import APPROVE, REJECT
from agentrun.models.contract import Gate

# How a paused budget's question (workflows.budgets.overrun) names the limit that was hit.
_LIMIT_FLAGS = (("prompts sent", "--iterations N"), ("tokens used", "--tokens N"), ("spent, over", "--usd X"))


def choices(gate: Gate) -> list[str]:
    """The answers a gate takes; [] for free text."""
    return gate.choices or ([APPROVE, REJECT] if gate.kind == "approval" else [])


def gate_line(run_id: str, gate: Gate) -> str:
    """`? review: Ship it? [approve/reject] — answer with: …`."""
    given = choices(gate)
    shown = f" [{'/'.join(given)}]" if given else ""
    return f"? {gate.id}: {gate.prompt}{shown} — {how_to_answer(run_id, gate)}"


def how_to_answer(run_id: str, gate: Gate) -> str:
    """The command that answers a gate, for the line that announces it."""
    base = spelling.client()
    if gate.kind == "budget":
        return (
            f"raise it with: {base} budget {run_id} --gate {gate.id} {_raising(gate.prompt)}, or {base} "
            f"reject {run_id} --gate {gate.id}"
        )
    if gate.call is not None:
        return (
            f"answer with: {base} approve {run_id} --gate {gate.id} (--pattern: and later calls like it), or "
            f"{base} reject {run_id} --gate {gate.id} --comment WHY"
        )
    if gate.kind == "approval":
        return f"answer with: {base} approve {run_id} --gate {gate.id} (or reject)"
    return f"answer with: {base} answer {run_id} --gate {gate.id} VALUE"


def _raising(prompt: str) -> str:
    """The option that raises the limit the run hit; all of them when the question does not say."""
    hit = [flag for words, flag in _LIMIT_FLAGS if words in prompt]
    return hit[0] if len(hit) == 1 else "--tokens N (or --usd X, --iterations N)"


def yes_no(given: list[str]) -> dict[str, str]:
    """y, yes, n and no for a gate's approve and reject, unless it takes those words as its own."""
    if APPROVE not in given or REJECT not in given or {"y", "yes", "n", "no"} & {c.lower() for c in given}:
        return {}
    return {"y": APPROVE, "yes": APPROVE, "n": REJECT, "no": REJECT}
