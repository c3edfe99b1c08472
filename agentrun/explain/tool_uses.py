"""A step's tool calls in words, the same in `watch`, `status`, `logs` and the report: the tool, its
arguments cut short, how it ended and why, how long it took."""

from __future__ import annotations

from agentrun.models.contract import RunState, ToolUse

OUTCOMES = {"running": "running", "ok": "ok", "error": "error", "refused": "REFUSED", "lost": "COULD NOT COMPLETE"}


def line(use: ToolUse) -> str:
    """`read {"path": "a.py"} → ok in 0.04s`, `bash {...} → REFUSED: outside the work directory`,
    `bash {...} → ok in 9.10s (ran again after its worker stopped: 2 attempts)`."""
    ended = OUTCOMES.get(use.outcome, use.outcome)
    why = f": {' '.join(use.reason.split())}" if use.reason and use.outcome != "ok" else ""
    took = f" in {use.duration_s:.2f}s" if use.outcome != "running" else ""
    again = f" (ran again after its worker stopped: {use.attempts} attempts)" if use.attempts > 1 else ""
    return f"{use.tool} {use.arguments} → {ended}{why}{took}{again}"


def counts(uses: list[ToolUse]) -> str:
    """`5 tool calls (4 ok, 1 REFUSED)`."""
    by: dict[str, int] = {}
    for use in uses:
        by[OUTCOMES.get(use.outcome, use.outcome)] = by.get(OUTCOMES.get(use.outcome, use.outcome), 0) + 1
    parts = ", ".join(f"{n} {what}" for what, n in by.items())
    return f"{len(uses)} tool call{'s' if len(uses) != 1 else ''} ({parts})"


def total(state: RunState) -> int:
    return sum(len(uses) for uses in state.tool_calls.values())
