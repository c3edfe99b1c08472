"""RECONCILE: the flags a goal's two checkpoints raise, by rule, with no model call."""

from __future__ import annotations

from typing import Any

# Confidence is a number from 0 to 1 (a number above 1 is read as a percentage) or a word; below
# this, or the word "low", the agent doubted its own plan before starting.
LOW_CONFIDENCE = 0.5
MAX_ASSUMPTIONS = 3
# What agents write in a list-or-text field to say it has nothing in it.
_NOTHING = frozenset({"", "none", "n/a", "na", "no", "nothing", "null", "false", "-"})


def flags(pre: dict[str, Any], post: dict[str, Any]) -> list[str]:
    """The flags raised, in a fixed order: concerns_raised, commitment_not_met, scope_deviation,
    unexpected_results, low_confidence, excess_assumptions. "partial" is a commitment not met."""
    raised = {
        "concerns_raised": _something(post.get("concerns")),
        "commitment_not_met": post.get("commitment_met") != "yes",
        "scope_deviation": _something(post.get("scope_changed")) or _something(post.get("deviations")),
        "unexpected_results": _something(post.get("unexpected_results")),
        "low_confidence": _low(pre.get("confidence")),
        "excess_assumptions": _count(pre.get("assumptions")) > MAX_ASSUMPTIONS,
    }
    return [name for name, up in raised.items() if up]


def _something(value: Any) -> bool:
    if isinstance(value, (list, tuple, dict)):
        return any(_something(item) for item in (value.values() if isinstance(value, dict) else value))
    if isinstance(value, bool) or value is None:
        return bool(value)
    return str(value).strip().lower() not in _NOTHING


def _count(value: Any) -> int:
    if isinstance(value, (list, tuple, dict)):
        return sum(1 for item in value if _something(item))
    return 1 if _something(value) else 0


def _low(value: Any) -> bool:
    if isinstance(value, str):
        word = value.strip().lower().rstrip("%")
        if word in ("low", "very low"):
            return True
        try:
            value = float(word)
        except ValueError:
            return False
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return (value / 100 if value > 1 else value) < LOW_CONFIDENCE
