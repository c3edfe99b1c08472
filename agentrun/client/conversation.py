"""What was said to each agent of a run and what it answered, in order (`logs RUN`), read from the
run's Temporal history: every prompt is an activity's input, every reply its result, so it works for
any run, ended or not, whichever worker ran it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import datetime

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client

from agentrun.client.models import Said
from agentrun.models.calls import RUN_AGENT, AgentCall, AgentReply
from agentrun.models.contract import ARGUMENTS_SHOWN
from agentrun.models.tools import RUN_TOOL, ToolCallInput, ToolResult

RESULT_SHOWN = 500  # characters of a tool's result shown


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
                yield Said(at=_at(event), task=used.step, agent=used.call.name, kind="tool", text=shown)
            if attrs.activity_type.name == RUN_AGENT and attrs.input.payloads:
                call = (await client.data_converter.decode(attrs.input.payloads[:1], [AgentCall]))[0]
                calls[event.event_id] = call
                if call.prompt:
                    yield Said(at=_at(event), task=call.task_id, agent=call.agent_id, kind="prompt", text=call.prompt)
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
    return Said(
        at=_at(event),
        task=used.step,
        agent=used.call.name,
        kind="result",
        text=f"{ended} in {result.duration_s:.2f}s\n{cut}",
    )


async def _outcome(client: Client, event: HistoryEvent, calls: dict[int, AgentCall]) -> Said | None:
    kind = event.event_type
    if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
        attrs = event.activity_task_completed_event_attributes
        call = calls.get(attrs.scheduled_event_id)
        if call is None or not attrs.result.payloads:
            return None
        reply = (await client.data_converter.decode(attrs.result.payloads[:1], [AgentReply]))[0]
        text = reply.text or "\n".join(f"(asks for tool {t.name}: {t.arguments})" for t in reply.tool_calls)
        return Said(at=_at(event), task=call.task_id, agent=call.agent_id, kind="reply", text=text, stderr=reply.stderr)
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
    return Said(at=_at(event), task=call.task_id, agent=call.agent_id, kind="failed", text=message)


def _at(event: HistoryEvent) -> datetime:
    return event.event_time.ToDatetime()
