"""What the agents of a run have written so far: each running agent call's last heartbeat
(activities.progress), read from Temporal's description of the run, so it shows whichever worker
runs the call. `status --json`, `watch`, `logs --follow` and the run's page read it here."""

from __future__ import annotations

from datetime import UTC, datetime

from temporalio.api.workflow.v1 import PendingActivityInfo
from temporalio.client import Client, WorkflowExecutionDescription

from agentrun.models.calls import RUN_AGENT, Partial


async def partials(client: Client, run_id: str, desc: WorkflowExecutionDescription | None = None) -> dict[str, Partial]:
    """The reply so far of each agent call under way, by task (run key). `desc`: the run's
    description, when the caller has it already. A retried call shows once its new attempt beats."""
    desc = desc or await client.get_workflow_handle(run_id).describe()
    now = datetime.now(UTC)
    found: dict[str, Partial] = {}
    for pending in desc.raw_description.pending_activities:
        record = await _record(client, pending)
        if record is None:
            continue
        # The record is as old as the heartbeat that carried it; bring its clocks up to now.
        since = max(0.0, (now - pending.last_heartbeat_time.ToDatetime(tzinfo=UTC)).total_seconds())
        record.elapsed_s = round(record.elapsed_s + since, 1)
        record.quiet_s = round(record.quiet_s + since, 1)
        found[record.task] = record
    return found


async def _record(client: Client, pending: PendingActivityInfo) -> Partial | None:
    if pending.activity_type.name != RUN_AGENT or not pending.heartbeat_details.payloads:
        return None
    try:
        (record,) = await client.data_converter.decode(pending.heartbeat_details.payloads[:1], [Partial])
    except (ValueError, TypeError):  # an older worker heartbeats nothing of this shape
        return None
    # Details outlive the attempt that sent them: a retry's own first beat replaces them.
    return record if isinstance(record, Partial) and record.attempt == pending.attempt else None
