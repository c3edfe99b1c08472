"""Building the prompt a task sends: system, retry message, instructions, loop message, completion."""

from __future__ import annotations

from typing import Any

from spec import ir
from spec.render import render
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
