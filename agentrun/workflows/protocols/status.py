"""The task tree's protocol: every reply ends with `COMPLETION_STATUS: <STATUS>`.

COMPLETE ends a task, ERROR fails it, and a loop (`loop_until`) prompts again until its status.
A reply with no status gets one reminder, unless the run is lenient.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from temporalio import workflow

from agentrun.lang import ir
from agentrun.models.contract import DEFAULT_MAX_ITERATIONS
from agentrun.models.texts.status_text import prompt, templated
from agentrun.workflows.failures import TaskFailed

if TYPE_CHECKING:
    from agentrun.models.contract import TaskState
    from agentrun.workflows.runtime import Runtime
    from agentrun.workflows.scope import Scope

WORD_BESIDE_STATUS = "loop-word-beside-status"
# Without a retry_message a retry is the same prompt again, as in cyberian; runs recorded before
# this rule got a default message naming the check's reason.
RETRY_AS_IS = "retry-without-message-as-is"
_STATUS = re.compile(r"COMPLETION_STATUS:\s*\**\s*([A-Za-z][\w-]*)")
# The task's output is the reply without its status line: the protocol is between the engine and
# the agent, and a report, a status, the page or an output file read by a person must not carry it.
# Runs recorded before kept the line in their outputs, which later prompts may have shown.
OUTPUT_WITHOUT_STATUS = "output-without-status-line"
_STATUS_LINE = re.compile(r"^[ \t]*[*_`]*COMPLETION_STATUS:[^\n]*(\n|\Z)", re.M)  # a line of its own
_STATUS_TAIL = re.compile(r"[ \t]*[*_`]*COMPLETION_STATUS:[^\n]*")  # at the end of a line of prose


class StatusProtocol:
    async def perform(
        self, engine: Runtime, node: ir.Task, scope: Scope, task: TaskState, retry_error: str | None
    ) -> str:
        """Prompt, and prompt again while a loop waits for its status; the last reply."""
        limit = (
            (node.loop_until.max_iterations if node.loop_until else None)
            or engine.inp.max_iterations
            or DEFAULT_MAX_ITERATIONS
        )
        first = engine.journal.get(scope.path + "#iteration", 1)
        iteration = first - 1
        while True:
            iteration += 1
            if iteration > first:
                engine.journal.mark(scope.path + "#iteration", iteration)  # where to start again
                await engine.between_rounds()
            task.count_iteration()
            workflow.set_current_details(f"Running **{node.label}**: attempt {task.attempts}, iteration {iteration}")
            retry = retry_error if iteration == first else None
            values = engine.values(scope, iteration=iteration) if retry is not None or templated(node) else {}
            text = prompt(node, values, retry, engine.inp.plan.undefined, older_retry=_older_retry(node, retry))
            reply = await _reply_with_status(engine, node, scope, text)
            if not node.loop_until or _loop_ended(node, reply):
                return _output(reply)
            if iteration >= limit:
                engine.state.warn(
                    f"{scope.key}: stopped after {limit} iterations without status {node.loop_until.status}"
                )
                return _output(reply)


STATUS = StatusProtocol()


def _output(reply: str) -> str:
    """What the task hands on and shows: the reply without its status line(s)."""
    return without_status(reply) if workflow.patched(OUTPUT_WITHOUT_STATUS) else reply


def without_status(reply: str) -> str:
    """The reply with every `COMPLETION_STATUS: …` (to the end of its line) left out, and the space it
    leaves at the end."""
    return _STATUS_TAIL.sub("", _STATUS_LINE.sub("", reply)).rstrip()


def _older_retry(node: ir.Task, retry_error: str | None) -> bool:
    """Whether a retry without a retry_message still gets the default one (a run recorded before)."""
    without_message = retry_error is not None and node.criteria is not None and node.criteria.retry_message is None
    return without_message and not workflow.patched(RETRY_AS_IS)


async def _reply_with_status(engine: Runtime, node: ir.Task, scope: Scope, text: str) -> str:
    """Send a prompt; an ERROR status fails the task; no status gets one nudge (strict mode)."""
    reply = await engine.conversation.ask(node, scope, text)
    status = status_of(reply)
    lenient = engine.inp.lenient or engine.inp.plan.completion == "lenient"
    if status is None and not lenient and not _loop_ended(node, reply):
        reply = await engine.conversation.ask(node, scope, nudge(node), phase="reminder")
        status = status_of(reply)
        if status is None and not _loop_ended(node, reply):
            raise TaskFailed(str(scope.key), "the agent stopped without a completion status, even after a reminder")
    if status == "ERROR":
        raise TaskFailed(str(scope.key), "the agent reported COMPLETION_STATUS: ERROR: " + reply.strip()[-300:])
    return reply


def status_of(reply: str) -> str | None:
    """The last `COMPLETION_STATUS: X` in a reply, upper-cased."""
    found = _STATUS.findall(reply)
    return found[-1].upper() if found else None


def loop_done(reply: str, status: str) -> bool:
    """A loop ends on `COMPLETION_STATUS: <status>`, or, as task trees do, on the status word
    anywhere in the reply as a whole word in any case ("NO_MORE_RESEARCH. COMPLETION_STATUS:
    COMPLETE" ends a loop waiting for NO_MORE_RESEARCH). A reply that says `COMPLETION_STATUS:
    CONTINUE` goes on whatever its prose names ("built 1 of 3; when all are BUILT …")."""
    explicit = status_of(reply)
    if explicit == status.upper():
        return True
    if explicit == "CONTINUE":
        return False
    return re.search(rf"(?<![\w-]){re.escape(status)}(?![\w-])", reply, re.IGNORECASE) is not None


def _loop_ended(node: ir.Task, reply: str) -> bool:
    if node.loop_until is None or not loop_done(reply, node.loop_until.status):
        return False
    explicit = status_of(reply)
    if explicit is None or explicit == node.loop_until.status.upper():
        return True
    # The word beside another status line: runs recorded before this rule kept looping here.
    return workflow.patched(WORD_BESIDE_STATUS)


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
