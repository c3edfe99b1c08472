"""The keys of humans in the loop that every dialect shares: approvals, questions' choices,
compensations and budgets, their raw models, and how each compiles to the IR."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, field_validator, model_validator

from agentrun.lang import ir
from agentrun.lang.errors import did_you_mean

COMPENSATION_ATTEMPTS = 3


class Strict(BaseModel):
    """A raw model of a loaded spec: an unknown key is an error, so a typo is never ignored. A key
    with an alias (a pipeline's `schema:`) is read by its field name too. Its schema is built on
    first use: every language is imported to ask which one a file is in, one compiles it."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)


def approval_shorthand(value: Any) -> Any:
    """`approval: true` is an approval with every default; `false` is none."""
    if value is True:
        return {}
    if value is False:
        return None
    if value is None or isinstance(value, dict):
        return value
    raise ValueError("must be true, false or a mapping")


def _choice_texts(value: Any) -> Any:
    """Choices are answers people type: numbers read as text, but a YAML boolean is a mistake."""
    if not isinstance(value, list):
        return value
    if any(isinstance(item, bool) for item in value):
        raise ValueError("YAML reads yes, no, on, off, true and false as booleans, not as choices")
    return [str(item) if isinstance(item, (int, float)) else item for item in value]


Choices = Annotated[list[str], BeforeValidator(_choice_texts)]


def text_shorthand(key: str) -> BeforeValidator:
    """`compensate: "text"` is short for `compensate: {<key>: "text"}`."""
    return BeforeValidator(lambda value: {key: value} if isinstance(value, str) else value)


class RawApproval(Strict):
    prompt: str | None = None
    timeout: float | str | None = None
    on_timeout: str = "fail"
    on_reject: Literal["fail", "skip", "continue"] = "fail"


class RawBudget(ir.Budget):
    # Every limit the IR's Budget has, so a limit added there is checked here too.
    @field_validator("*")
    @classmethod
    def _positive(cls, value: Any) -> Any:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value <= 0:
            raise ValueError("must be more than 0")
        return value

    @model_validator(mode="after")
    def _some_limit(self) -> RawBudget:
        limits = [name for name in type(self).model_fields if name != "on_exceeded"]
        if all(getattr(self, name) is None for name in limits):
            raise ValueError("a budget needs " + " or ".join(f"{name}:" for name in limits))
        return self


# Hints for values the shared validators refuse, by the key holding the value.
VALUE_HINTS = {
    "choices": 'quote them: choices: ["yes", "no"]',
    "approval": "write approval: true, or approval: {prompt: ..., timeout: 1h, on_reject: fail}",
    "budget": "give a limit: budget: {tokens: 200000} or budget: {usd: 5}, and optionally on_exceeded: pause",
    "tokens": "a budget is a positive number of tokens (tokens: 200000)",
    "usd": "a budget is a positive number of US dollars (usd: 5)",
}


def budget_of(raw: RawBudget | None) -> ir.Budget | None:
    return ir.Budget(**raw.model_dump()) if raw else None


def approval_gate(gate_id: str, title: str, raw: RawApproval, timeout_s: float | None, line: int) -> ir.Human:
    return ir.Human(
        id=gate_id,
        title=title,
        approval=True,
        choices=[ir.APPROVE, ir.REJECT],
        prompt=raw.prompt or f"Approve '{gate_id}'?",
        timeout_s=timeout_s,
        on_timeout=raw.on_timeout,
        on_reject=raw.on_reject,
        line=line,
    )


def on_timeout_problem(on_timeout: str, choices: list[str]) -> tuple[str, str] | None:
    """(message, hint) when `on_timeout` is neither fail, continue nor one of the choices."""
    if on_timeout in ("fail", "continue") or on_timeout in choices:
        return None
    message = f"on_timeout '{on_timeout}' is not fail, continue or one of the choices"
    if not choices:
        return message, "write fail or continue, or list choices: and name one of them"
    return message, did_you_mean(on_timeout, choices) or "write fail, continue or one of: " + ", ".join(choices)


def compensation_task(
    node_id: str,
    title: str,
    agent: str,
    prompt: str,
    attempts: int,
    line: int,
    protocol: ir.Protocol = "plain",
    system: str | None = None,
) -> ir.Task:
    """An agent prompt that undoes a node; compensations retry on their own, since a failed undo
    leaves the world half changed. In a task tree the agent answers with a completion status as
    for any task, so an undo that reports ERROR counts as failed."""
    return ir.Task(
        id=f"{node_id}.compensate",
        title=f"undo {title}",
        agent=agent,
        prompt=prompt,
        protocol=protocol,
        system=system,
        retry=compensation_retry(attempts),
        line=line,
    )


def compensation_retry(attempts: int) -> ir.Retry:
    return ir.Retry(attempts=attempts, backoff="exponential", delay_s=1.0)
