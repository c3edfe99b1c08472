"""A tool call the policy's `ask` takes waits for a person before it is scheduled.

The decision is the policy's own (agentrun.policy.approval: text and patterns only), made here in
the workflow, so the gate opens before any activity of the call exists. The gate is a normal
approval gate of the run (workflows.humans): whatever lists and answers gates answers this one. Its
answer is in the run's history, and the call that follows is the one the person saw, with the same
arguments and the same idempotency key: a worker killed between the approval and the call replays
the approval and runs the call once.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

from temporalio import workflow
from temporalio.exceptions import ActivityError

from agentrun.lang import ir
from agentrun.models.contract import Answer, ToolAsk
from agentrun.models.tools import PREVIEW_TOOL, ToolCall, ToolCallInput
from agentrun.policy import Asked, approval
from agentrun.workflows import activity_calls

if TYPE_CHECKING:
    from agentrun.workflows.tool_loop import Route, Toolbox

ASK = "tool-calls-ask"  # the patch under which a call the policy's `ask` takes waits for a person
DIFFED = ("write", "edit")  # calls shown as a diff against the file as it is now
WORDS_SHOWN = 2000  # characters of the agent's words before the call the gate keeps


async def ask(box: Toolbox, route: Route, call: ToolCall) -> str | None:
    """None when the call goes on to its source; else why it does not (a person rejected it, no
    one answered in time), for the model to read as the call's result."""
    asked = Asked(route.source, route.target, call.arguments, workdir=box.workdir)  # type: ignore[arg-type]
    decision = approval(box.policy, asked)
    if decision.verdict != "ask" or not workflow.patched(ASK):
        return None
    approved = f"{route.target} {decision.pattern}"
    state = box.conv.state
    if approved in state.approved_patterns:
        return None
    humans = box.conv.humans
    if humans is None:
        return f"a person must approve this call ({decision.reason}), and no one answers this kind of run"
    shown = ToolAsk(
        step=box.key,
        tool=route.target,
        source=route.source,
        call_id=call.id,
        arguments=json.dumps(call.arguments, ensure_ascii=False, sort_keys=True),
        digest=digest(route.target, call.arguments),
        words=box.words[:WORDS_SHOWN],
        diff=await _diff(box, route, call),
        pattern=decision.pattern,
    )
    prompt = f"{box.key}: run {route.target} {shown.arguments}? ({decision.reason})"
    timeout = box.policy.ask_timeout_s
    answer = await humans.approve_call(f"{box.key}.{route.target}", prompt, shown, timeout)
    return _refusal(answer, timeout, approved, state.approved_patterns)


def digest(tool: str, arguments: dict[str, object]) -> str:
    """What an approval is bound to: the tool and its arguments, whatever order they came in."""
    text = json.dumps({"tool": tool, "arguments": arguments}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _refusal(answer: Answer | None, timeout: float | None, approved: str, patterns: list[str]) -> str | None:
    if answer is None:
        return f"no one approved this call within {timeout or 0:g}s: it was not run"
    if answer.value == ir.APPROVE_PATTERN:
        patterns.append(approved)
    if answer.value in (ir.APPROVE, ir.APPROVE_PATTERN):
        return None
    who = f" by {answer.by}" if answer.by else ""
    why = f": {answer.comment}" if answer.comment else " (no reason given)"
    return f"a person rejected this call{who}; it was not run{why}"


async def _diff(box: Toolbox, route: Route, call: ToolCall) -> str:
    """A write or edit as a diff against the file as it is now (the preview_tool activity)."""
    if route.source != "builtin" or route.target not in DIFFED:
        return ""
    arg = ToolCallInput(call=call, workdir=box.workdir, policy=box.policy, run_id=box.conv.state.run_id, step=box.key)
    try:
        return await activity_calls.call(
            PREVIEW_TOOL, arg, str, summary=f"{box.node.label}: the change {call.name} asks to make", timeout_s=60.0
        )
    except ActivityError as exc:
        return f"(the file as it is now cannot be shown: {activity_calls.reason(exc)})"
