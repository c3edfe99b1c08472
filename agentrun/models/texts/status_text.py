"""What a task tree's step says to its agent: its prompt and the status line it must end with."""

from __future__ import annotations

from typing import Any

from agentrun.lang import ir
from agentrun.lang.render import UndefinedNames, is_template, render


def prompt(
    task: ir.Task,
    values: dict[str, Any],
    retry_error: str | None,
    undefined: UndefinedNames = "error",
    older_retry: bool = False,
) -> str:
    """System text, the retry message, the instructions, the loop message, the status instruction.
    A retry without a retry_message is the prompt as it was, as in cyberian (`older_retry`: with the
    default message runs recorded before that rule sent)."""
    system, body, loop_message = _texts(task)
    parts: list[str] = []
    if system:
        parts.append(render(system, values, undefined))
    message = task.criteria.retry_message if task.criteria else None
    if older_retry:
        message = message or "The previous attempt failed its success check: {{ error }}"
    if retry_error is not None and message is not None:
        parts.append(render(message, {**values, "error": retry_error}, undefined))
    parts.append(render(body, values, undefined))
    if loop_message:
        parts.append(render(loop_message, values, undefined))
    parts.append(instruction(task))
    return "\n\n".join(p.strip() for p in parts if p.strip())


def _texts(task: ir.Task) -> tuple[str | None, str, str | None]:
    """The texts of the prompt filled in with the run's values (a retry's message aside): system,
    instructions, the loop's message."""
    return task.system, task.prompt, task.loop_until.message if task.loop_until else None


def templated(task: ir.Task) -> bool:
    """Whether any of the prompt's texts is a template to fill in: a prompt of plain text needs none
    of the run's values, which are built afresh for each."""
    return any(text and is_template(text) for text in _texts(task))


def instruction(task: ir.Task) -> str:
    if task.loop_until:
        return (
            "End your reply with a line `COMPLETION_STATUS: <STATUS>` as asked above "
            "(or `COMPLETION_STATUS: ERROR` if you cannot go on)."
        )
    return (
        "When you have finished, end your reply with the line `COMPLETION_STATUS: COMPLETE` "
        "(or `COMPLETION_STATUS: ERROR` if you could not do the task)."
    )
