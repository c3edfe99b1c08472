"""Activity retries as a person following a run sees them: one per retry, from the run's pending
activities in Temporal (so they show whichever worker runs the agent).

A retry happens on the server, out of the workflow's sight until the activity ends, so the run's own
state cannot tell; Temporal's description of the run can.
"""

from __future__ import annotations

from typing import Any

from temporalio.api.enums.v1 import EventType, TimeoutType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflow.v1 import PendingActivityInfo
from temporalio.client import Client, WorkflowExecutionDescription

from agentrun.client.models import Retry


class Retries:
    """The retries of a run's activities not told yet."""

    def __init__(self, client: Client, run_id: str):
        self.client, self.run_id = client, run_id
        self.shown: set[tuple[str, int]] = set()
        self.inputs: dict[str, dict[str, Any]] = {}  # activity id -> its input, for the task and agent

    async def new(self, description: WorkflowExecutionDescription | None = None) -> list[Retry]:
        """`description`: the run's, when the caller has it already."""
        description = description or await self.client.get_workflow_handle(self.run_id).describe()
        found = []
        for pending in description.raw_description.pending_activities:
            seen = (pending.activity_id, pending.attempt)
            if pending.attempt < 2 or not pending.HasField("last_failure") or seen in self.shown:
                continue
            self.shown.add(seen)
            found.append(_retry(pending, await self._input(pending.activity_id)))
        return found

    async def _input(self, activity_id: str) -> dict[str, Any]:
        """What the activity was given (its task id, its agent id), read once from the run's history."""
        if activity_id not in self.inputs:
            handle = self.client.get_workflow_handle(self.run_id)
            async for event in handle.fetch_history_events():
                if event.event_type != EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                    continue
                attrs = event.activity_task_scheduled_event_attributes
                if attrs.activity_id in self.inputs or not attrs.input.payloads:
                    continue
                value = (await self.client.data_converter.decode(attrs.input.payloads[:1]))[0]
                self.inputs[attrs.activity_id] = value if isinstance(value, dict) else {}
        return self.inputs.get(activity_id, {})


def _retry(pending: PendingActivityInfo, given: dict[str, Any]) -> Retry:
    failure = pending.last_failure
    interval = pending.current_retry_interval if pending.HasField("current_retry_interval") else None
    return Retry(
        activity_id=pending.activity_id,
        activity=pending.activity_type.name,
        attempt=pending.attempt,
        task=str(given.get("task_id") or ""),
        agent=str(given.get("agent_id") or ""),
        why=failure.message or failure.application_failure_info.type or "failed",
        maximum_attempts=pending.maximum_attempts,
        retry_in_s=interval.ToTimedelta().total_seconds() if interval else None,
    )


async def lost_workers(client: Client, run_id: str) -> list[str]:
    """The steps whose activity was retried because its worker stopped answering (a heartbeat or
    start-to-close timeout before the attempt that ended it): `build (attempt 2)`, from the run's
    history, where each ended activity's start names the failure of the attempt before it."""
    handle = client.get_workflow_handle(run_id)
    retried: list[tuple[int, int]] = []  # (scheduled event id, attempt)
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            started = event.activity_task_started_event_attributes
            timeout = started.last_failure.timeout_failure_info.timeout_type
            if started.attempt > 1 and timeout in _LOST:
                retried.append((started.scheduled_event_id, started.attempt))
    if not retried:
        return []
    # Rare, and then a second reading decodes those activities' inputs only: a prompt may be
    # megabytes, or kept outside the history.
    wanted, tasks = {scheduled for scheduled, _ in retried}, {}
    async for event in handle.fetch_history_events():
        if event.event_id in wanted:
            tasks[event.event_id] = await _task_of(client, event)
    return [f"{tasks.get(scheduled, '?')} (attempt {attempt})" for scheduled, attempt in retried]


async def _task_of(client: Client, scheduled: HistoryEvent) -> str:
    """The task an activity was scheduled for, from its input; its activity id when that says none."""
    attrs = scheduled.activity_task_scheduled_event_attributes
    given = (await client.data_converter.decode(attrs.input.payloads[:1]))[0] if attrs.input.payloads else {}
    return given.get("task_id", attrs.activity_id) if isinstance(given, dict) else ""


_LOST = (TimeoutType.TIMEOUT_TYPE_HEARTBEAT, TimeoutType.TIMEOUT_TYPE_START_TO_CLOSE)
