"""Reading completion statuses out of agent replies, and the instruction that asks for them."""

from __future__ import annotations

import re

from spec import ir

_STATUS = re.compile(r"COMPLETION_STATUS:\s*\**\s*([A-Za-z][\w-]*)")


def status_of(reply: str) -> str | None:
    """The last `COMPLETION_STATUS: X` in a reply, upper-cased."""
    found = _STATUS.findall(reply)
    return found[-1].upper() if found else None


def loop_done(reply: str, status: str) -> bool:
    """A loop ends on `COMPLETION_STATUS: <status>` or, as the real system does, the bare word.

    An explicit status line is authoritative: "built 1 of 3 … COMPLETION_STATUS: CONTINUE" must not
    end a loop waiting for BUILT, so the bare word counts only in replies without a status line.
    """
    explicit = status_of(reply)
    if explicit is not None:
        return explicit == status.upper()
    return re.search(rf"(?<![\w-]){re.escape(status)}(?![\w-])", reply, re.IGNORECASE) is not None


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


def nudge(task: ir.Task) -> str:
    if task.loop_until:
        return (
            f"You stopped without a completion status. Reply with the line "
            f"`COMPLETION_STATUS: {task.loop_until.status}` if you are done, "
            "`COMPLETION_STATUS: CONTINUE` if there is more to do, or `COMPLETION_STATUS: ERROR`."
        )
    return (
        "You stopped without a completion status. Reply with the line `COMPLETION_STATUS: COMPLETE` "
        "if the task is done, or `COMPLETION_STATUS: ERROR` if it failed."
    )
