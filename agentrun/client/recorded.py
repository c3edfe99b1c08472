"""What a run's history records of its steps, for a run no worker answers for: the steps whose
activities completed, failed or started, so a run whose worker was killed does not look as if it
had done nothing."""

from __future__ import annotations

from datetime import UTC

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client
from temporalio.service import RPCError

from agentrun.models.contract import TaskState, TaskStatus

_ENDED: dict[EventType.ValueType, TaskStatus] = {
    EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: "completed",
    EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED: "failed",
    EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT: "failed",
}


async def steps(client: Client, run_id: str, rows: dict[str, TaskState]) -> dict[str, TaskState]:
    """`rows` (the steps as the run started) with what the history says each step's activities did:
    started (running, its attempt), completed or failed. Rows are left as they are where the history
    cannot be read."""
    scheduled: dict[int, str] = {}  # scheduled event id -> the step it runs
    try:
        async for event in client.get_workflow_handle(run_id).fetch_history_events():
            if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                step = await _step_of(client, event)
                if step in rows:
                    scheduled[event.event_id] = step
            else:
                _apply(event, scheduled, rows)
    except (RPCError, ValueError, TypeError):
        pass  # a history this client cannot read: the rows as the run started
    return rows


async def _step_of(client: Client, event: HistoryEvent) -> str:
    payloads = event.activity_task_scheduled_event_attributes.input.payloads
    given = (await client.data_converter.decode(payloads[:1]))[0] if payloads else None
    return str(given.get("task_id") or "") if isinstance(given, dict) else ""


def _apply(event: HistoryEvent, scheduled: dict[int, str], rows: dict[str, TaskState]) -> None:
    if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
        attrs = event.activity_task_started_event_attributes
        if step := scheduled.get(attrs.scheduled_event_id):
            rows[step].status, rows[step].attempts = "running", attrs.attempt
            rows[step].started_at = rows[step].started_at or event.event_time.ToDatetime(tzinfo=UTC)
        return
    status = _ENDED.get(event.event_type)
    if status is None:
        return
    field = event.WhichOneof("attributes")
    attrs = getattr(event, field) if field else None
    step = scheduled.get(getattr(attrs, "scheduled_event_id", 0))
    if step:
        row = rows[step]
        row.status, row.ended_at = status, event.event_time.ToDatetime(tzinfo=UTC)
        row.attempts = max(row.attempts, 1)
        if row.started_at:
            row.duration_s = (row.ended_at - row.started_at).total_seconds()
        if status == "failed":
            row.error = getattr(getattr(attrs, "failure", None), "message", "") or "failed"
