"""`client logs RUN [--task ID] [--follow]`: what was said to each agent and what it answered, in
order, read from the run's Temporal history (every prompt is an activity's input, every reply its
result), so it works for any run, ended or not, whichever worker ran it. With --follow, a reply
also shows as it grows (from the call's heartbeats, client.partial), then whole once it ends."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from datetime import datetime
from typing import NamedTuple

from rich.console import Console
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client
from temporalio.service import RPCError

from agentrun.client.partial import partials
from agentrun.client.runs import describe
from agentrun.models.calls import RUN_AGENT, AgentCall, AgentReply
from agentrun.models.contract import ARGUMENTS_SHOWN
from agentrun.models.tools import RUN_TOOL, ToolCallInput, ToolResult

GROWING_POLL_S = 0.5
RESULT_SHOWN = 500  # characters of a tool's result shown


class Said(NamedTuple):
    """One thing in an agent conversation: a prompt, a reply, or a failed call."""

    at: datetime
    task: str
    agent: str
    kind: str  # prompt, reply, failed; tool (a call) and result (what it gave back)
    text: str
    stderr: str = ""


async def logs_command(client: Client, args: argparse.Namespace, console: Console) -> int:
    await describe(client, args.run_id)  # a clear error for a run that is not there
    shown = 0
    growing = _Growing(console, args.task)
    poller = asyncio.create_task(growing.follow(client, args.run_id)) if args.follow else None
    try:
        async for said in conversation(client, args.run_id, args.follow):
            if args.task and not belongs(said.task, args.task):
                continue
            shown += 1
            growing.said(said)
            console.print(render(said), markup=False, highlight=False)
    finally:
        if poller is not None:
            poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await poller
    if not shown:
        about = f" of task '{args.task}'" if args.task else ""
        console.print(f"no agent has been asked anything{about} in run {args.run_id}", markup=False)
    return 0


class _Growing:
    """Replies under way, printed as they grow under their prompt: a head line, then each new piece.
    The heartbeats run ahead of the history: a call's growth waits until its prompt is out, and a
    piece of another task's reply (side-by-side steps) starts on a line of its own under a head."""

    def __init__(self, console: Console, task: str | None) -> None:
        self.console, self.task = console, task
        self.asked: dict[str, int] = {}  # tasks whose prompt is out: the call it was (their count)
        self.calls: dict[str, int] = {}  # calls of each task that ended, so a late record is not taken
        self.printed: dict[str, int] = {}  # characters printed of each task's reply under way
        self.writing: str | None = None  # the task whose reply the last piece was of, mid-line

    async def follow(self, client: Client, run_id: str) -> None:
        while True:
            before = dict(self.calls)
            with contextlib.suppress(RPCError):  # the server busy for a moment: the next look will do
                for record in (await partials(client, run_id)).values():
                    if self.calls.get(record.task) != before.get(record.task):
                        continue  # its call ended while the records were read: they are of that call
                    if self.asked.get(record.task) == self.calls.get(record.task, 0):
                        self._grew(record.task, record.agent, record.tail, record.chars)
            await asyncio.sleep(GROWING_POLL_S)

    def _grew(self, task: str, agent: str, tail: str, chars: int) -> None:
        before = self.printed.get(task, 0)
        if chars <= before:
            return
        if self.writing != task:
            self.break_line()
            self._write(f"── {task} ← agent '{agent}' (writing)\n")
        new = chars - before
        self._write(tail[-new:] if new <= len(tail) else "…" + tail)
        self.printed[task], self.writing = chars, task

    def said(self, said: Said) -> None:
        """Before `said` is printed: a prompt opens its task's call, anything else ends it."""
        self.break_line()
        if said.kind == "prompt":
            self.asked[said.task] = self.calls.get(said.task, 0)
            return
        self.calls[said.task] = self.calls.get(said.task, 0) + 1
        self.asked.pop(said.task, None)
        self.printed.pop(said.task, None)

    def break_line(self) -> None:
        if self.writing is not None:
            self._write("\n")
            self.writing = None

    def _write(self, text: str) -> None:
        self.console.print(text, end="", markup=False, highlight=False, soft_wrap=True)


def belongs(task: str, wanted: str) -> bool:
    """`wanted` itself, one of its map elements (`score[2]`) or one of its sub-agents (`goal/agent-1`)."""
    return task == wanted or task.startswith((f"{wanted}[", f"{wanted}/"))


async def conversation(client: Client, run_id: str, follow: bool = False) -> AsyncIterator[Said]:
    """The run's prompts, replies, tool calls and failed agent calls, in the order they happened."""
    calls: dict[int, AgentCall] = {}  # by the event id that scheduled the call
    tools: dict[int, ToolCallInput] = {}  # likewise, the tool calls
    handle = client.get_workflow_handle(run_id)
    async for event in handle.fetch_history_events(wait_new_event=follow):
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = event.activity_task_scheduled_event_attributes
            if attrs.activity_type.name == RUN_TOOL and attrs.input.payloads:
                used = (await client.data_converter.decode(attrs.input.payloads[:1], [ToolCallInput]))[0]
                tools[event.event_id] = used
                shown = json.dumps(used.call.arguments, ensure_ascii=False)[:ARGUMENTS_SHOWN]
                yield Said(_at(event), used.step, used.call.name, "tool", shown)
            if attrs.activity_type.name == RUN_AGENT and attrs.input.payloads:
                call = (await client.data_converter.decode(attrs.input.payloads[:1], [AgentCall]))[0]
                calls[event.event_id] = call
                if call.prompt:
                    yield Said(_at(event), call.task_id, call.agent_id, "prompt", call.prompt)
            continue
        said = await _outcome(client, event, calls) or await _tool_result(client, event, tools)
        if said:
            yield said


async def _tool_result(client: Client, event: HistoryEvent, tools: dict[int, ToolCallInput]) -> Said | None:
    if event.event_type != EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
        return None
    attrs = event.activity_task_completed_event_attributes
    used = tools.get(attrs.scheduled_event_id)
    if used is None or not attrs.result.payloads:
        return None
    result = (await client.data_converter.decode(attrs.result.payloads[:1], [ToolResult]))[0]
    ended = "ok" if result.ok else "REFUSED" if result.refused else "error"
    text = result.content if result.ok else (result.error or result.content)
    cut = text[:RESULT_SHOWN] + (f"… ({len(text)} characters)" if len(text) > RESULT_SHOWN else "")
    return Said(_at(event), used.step, used.call.name, "result", f"{ended} in {result.duration_s:.2f}s\n{cut}")


async def _outcome(client: Client, event: HistoryEvent, calls: dict[int, AgentCall]) -> Said | None:
    kind = event.event_type
    if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
        attrs = event.activity_task_completed_event_attributes
        call = calls.get(attrs.scheduled_event_id)
        if call is None or not attrs.result.payloads:
            return None
        reply = (await client.data_converter.decode(attrs.result.payloads[:1], [AgentReply]))[0]
        text = reply.text or "\n".join(f"(asks for tool {t.name}: {t.arguments})" for t in reply.tool_calls)
        return Said(_at(event), call.task_id, call.agent_id, "reply", text, reply.stderr)
    failed = {
        EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED: event.activity_task_failed_event_attributes,
        EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT: event.activity_task_timed_out_event_attributes,
    }.get(kind)
    if failed is None or failed.scheduled_event_id not in calls:
        return None
    call = calls[failed.scheduled_event_id]
    message = failed.failure.message or "failed"
    if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
        message = f"timed out: {message}"
    return Said(_at(event), call.task_id, call.agent_id, "failed", message)


def render(said: Said) -> str:
    when = f"{said.at:%H:%M:%S}"
    if said.kind == "failed":
        return f"── {when} {said.task} ✗ agent '{said.agent}' failed: {said.text}\n"
    if said.kind == "tool":  # `agent` is the tool's name
        return f"── {when} {said.task} ⚒ {said.agent} {said.text}\n"
    if said.kind == "result":
        return f"── {when} {said.task} ⚒ {said.agent} → {said.text.rstrip()}\n"
    arrow = "→" if said.kind == "prompt" else "←"
    text = f"── {when} {said.task} {arrow} agent '{said.agent}' ({said.kind})\n{said.text.rstrip()}\n"
    if said.stderr:
        text += f"── stderr of agent '{said.agent}'\n{said.stderr.rstrip()}\n"
    return text


def _at(event: HistoryEvent) -> datetime:
    return event.event_time.ToDatetime()
