"""What a behaviour tree's steps say to an agent, and how its answers are read. Pure: no I/O.

The step's text is the tree author's and is sent as written, never rendered as a template; the
values of the `$VAR` and `$CONST` names it mentions are shown after it, as the blackboard holds them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from agentrun.lang import ir
from agentrun.lang.blackboard import MISSING, NAMED, is_constant, lookup
from agentrun.lang.render import clip
from agentrun.lang.rules import extract_json

CONSTANTS = "$CONST"  # the template-values key under which a run's constants reach first_prompt
VALUE_CHARS = 2_000

StepStatus = Literal["success", "failure", "running"]


@dataclass
class Verdict:
    """An evaluate step's answer."""

    result: bool
    note: str = ""


@dataclass
class Outcome:
    """An instruct step's answer: its status, the $VAR writes it asks for, its note."""

    status: StepStatus
    var: dict[str, Any] = field(default_factory=dict[str, Any])
    note: str = ""


class BadAnswer(ValueError):
    """A reply that is not the JSON object a step asks for."""


def step_prompt(node: ir.Task, var: dict[str, Any], const: dict[str, Any], ask: int = 1) -> str:
    """The prompt of an evaluate or instruct step, with the values its text names."""
    step = node.tree_step
    assert step is not None
    head = f"Behaviour tree action {step.action}, step {step.index + 1}."
    if ask > 1:
        head = f"You said this step was still running; this is ask {ask}. " + head
    if node.protocol == "evaluate":
        body = f"Judge whether this precondition holds:\n\n{node.prompt.strip()}"
    else:
        body = f"Do this:\n\n{node.prompt.strip()}"
    parts = [head, body]
    shown = shown_values(node.prompt, var, const)
    if shown:
        parts.append("Current values:\n" + "\n".join(shown))
    parts.append(answer_format(node.protocol))
    return "\n\n".join(parts)


def shown_values(text: str, var: dict[str, Any], const: dict[str, Any]) -> list[str]:
    """`- $VAR.x = <json>` for each blackboard name the text mentions, in order, once each."""
    lines: list[str] = []
    for match in NAMED.finditer(text):
        scope, path = match.group(1), match.group(2)
        line = f"- ${scope}.{path} = {_json(lookup(const if is_constant(scope) else var, path))}"
        if line not in lines:
            lines.append(line)
    return lines


def _json(value: Any) -> str:
    if value is MISSING:
        return "(not set)"
    return clip(json.dumps(value, ensure_ascii=False, default=str), VALUE_CHARS)


def answer_format(protocol: str) -> str:
    if protocol == "evaluate":
        return 'Reply with one JSON object: {"result": true or false, "note": "one sentence why"}.'
    return (
        'Reply with one JSON object: {"status": "success" | "failure" | "running", "var": {...}, '
        '"note": "one sentence"}. Put in "var" the $VAR values the step asks you to store, by name '
        '(for $VAR.x write {"x": value}); $CONST values are read-only. Say "running" when the work is '
        "not finished yet: you will be asked again later."
    )


def reminder(protocol: str, problem: str) -> str:
    """The one follow-up a reply that is not the step's JSON gets."""
    return f"Your reply could not be read: {problem}.\n\n{answer_format(protocol)}"


def read_verdict(reply: str) -> Verdict:
    value = _object(reply)
    result = value.get("result")
    if not isinstance(result, bool):
        raise BadAnswer('"result" must be true or false')
    return Verdict(result, _note(value))


def read_outcome(reply: str) -> Outcome:
    value = _object(reply)
    status = value.get("status")
    if status not in ("success", "failure", "running"):
        raise BadAnswer('"status" must be "success", "failure" or "running"')
    var: Any = value.get("var") or {}
    if not isinstance(var, dict):
        raise BadAnswer('"var" must be an object of names and values')
    return Outcome(status, cast(dict[str, Any], var), _note(value))


def _object(reply: str) -> dict[str, Any]:
    try:
        value = extract_json(reply)
    except ValueError as exc:
        raise BadAnswer(str(exc)) from None
    if not isinstance(value, dict):
        raise BadAnswer("the reply's JSON is not an object")
    return cast(dict[str, Any], value)


def _note(value: dict[str, Any]) -> str:
    note = value.get("note")
    return note if isinstance(note, str) else ""
