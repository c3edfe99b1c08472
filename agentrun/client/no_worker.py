"""A run no worker answers for: what it was started with, and how to get a worker to it.

Without a worker nobody can query the run's state; its start input, in Temporal's history, still
says which spec it runs and what its steps are.
"""

from __future__ import annotations

from datetime import UTC, datetime

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.service import RPCError

from agentrun.client import recorded
from agentrun.explain.waiting import NO_WORKER, hint, stuck_hint
from agentrun.models import contract
from agentrun.models.contract import RunInput, RunState

# Steps are read from the run's history: what its activities did; a worker holds the rest.
RECORDED = "its steps are shown as its history records them: the rest is known once a worker takes the run"


async def state(client: Client, run_id: str, task_queue: str, polled: bool) -> RunState:
    """The run as it was started: its spec, its steps as its history records them, and why
    nothing more is known."""
    started = await start_input(client, run_id)
    why = await stuck(client, run_id) if polled else None
    warnings = [NO_WORKER, stuck_hint(run_id, task_queue, why) if why else hint(run_id, task_queue, polled)]
    if started is None:
        return RunState(run_id=run_id, status="running", warnings=warnings)
    warnings.append(RECORDED)
    plan = started.plan
    return RunState(
        run_id=run_id,
        spec=plan.name,
        dialect=plan.dialect,
        traits=plan.traits,
        goal=plan.goal or plan.description,
        status="running",
        tasks=await recorded.steps(client, run_id, contract.task_rows(plan)),
        warnings=warnings,
    )


# A workflow task that has waited this long for a worker that polls the queue is not coming.
STUCK_S = 30.0


async def stuck(client: Client, run_id: str) -> str | None:
    """Why the run's next piece of work is not being done though a worker polls its queue: its
    pending workflow task (an answer, a step's end) has failed and is tried again, or has waited
    STUCK_S. None when it has none, or not for long."""
    try:
        raw = (await client.get_workflow_handle(run_id).describe()).raw_description
    except RPCError:
        return None
    if not raw.HasField("pending_workflow_task"):
        return None
    task = raw.pending_workflow_task
    since = task.original_scheduled_time.ToDatetime(tzinfo=UTC) if task.HasField("original_scheduled_time") else None
    waited = (datetime.now(UTC) - since).total_seconds() if since else 0.0
    if task.attempt <= 1 and waited < STUCK_S:
        return None
    tried = f", tried {task.attempt} times" if task.attempt > 1 else ""
    return f"has not taken this run's work for {waited:.0f} s{tried}"


async def start_input(client: Client, run_id: str) -> RunInput | None:
    """What `start` gave the run, from the first event of its history."""
    handle = client.get_workflow_handle(run_id)
    try:
        async for event in handle.fetch_history_events():
            if event.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
                return None
            payloads = event.workflow_execution_started_event_attributes.input.payloads
            return (await client.data_converter.decode(payloads[:1], [RunInput]))[0] if payloads else None
    except (RPCError, ValueError, TypeError):  # a run of another shape than this client knows
        return None
    return None
