"""Building the prompt a task sends: system, retry message, instructions, loop message, completion."""

from __future__ import annotations

from typing import Any

from spec import ir
from spec.render import names_used, render, to_text
from workflows import completion


def build(task: ir.Task, context: dict[str, Any], retry_error: str | None) -> str:
    parts = []
    if task.system:
        parts.append(render(task.system, context))
    if retry_error is not None and task.criteria:
        message = task.criteria.retry_message or "The previous attempt failed its success check: {{ error }}"
        parts.append(render(message, {**context, "error": retry_error}))
    parts.append(render(task.prompt, context))
    if task.loop_until and task.loop_until.message:
        parts.append(render(task.loop_until.message, context))
    parts.append(completion.instruction(task))
    return "\n\n".join(p.strip() for p in parts if p.strip())


def build_plain(task: ir.Task, context: dict[str, Any]) -> str:
    """A pipeline agent's prompt: its template, then the input and feedback it did not place itself."""
    parts = [render(task.system, context)] if task.system else []
    parts.append(render(task.prompt, context))
    used = names_used(task.prompt) | (names_used(task.system) if task.system else frozenset())
    for name, heading in (("input", "Input:"), ("feedback", "Feedback on your previous output:")):
        placed = name in used or (name == "input" and "item" in used)
        if context.get(name) is not None and not placed:
            parts.append(f"{heading}\n{to_text(context[name])}")
    return "\n\n".join(p.strip() for p in parts if p.strip())


def judge(rule: str, output: str) -> str:
    return (
        "Does the output below satisfy this rule? Answer PASS or FAIL on the first line, then one "
        f"sentence why.\n\nRule: {rule}\n\nOutput:\n{output}"
    )
