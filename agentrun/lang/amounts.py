"""Money and budgets in words, for reports, prompts to people and the spec commands."""

from __future__ import annotations

from agentrun.lang import ir


def dollars(amount: float) -> str:
    """$0.000008, $1.5: enough digits for the tiny sums of single prompts."""
    return "$" + f"{amount:,.6f}".rstrip("0").rstrip(".")


def limits_text(budget: ir.Budget) -> str:
    """A budget's limits in words: `5000 tokens, $0.5, 10 prompts`."""
    limits = [f"{budget.tokens} tokens"] if budget.tokens is not None else []
    limits += [dollars(budget.usd)] if budget.usd is not None else []
    limits += [f"{budget.iterations} prompts"] if budget.iterations is not None else []
    return ", ".join(limits) or "no limit"
