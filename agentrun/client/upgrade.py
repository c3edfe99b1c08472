"""`upgrade check`: replay the histories of open runs with the code installed here, as its workers
would, and name each run that would fail, the first event where it departs from its history and the
step that event belongs to. A run that replays is safe to move onto this build."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowHistory
from temporalio.service import RPCError
from temporalio.worker import Replayer

from agentrun.errors import UsageError

# The engine's own workflows: another program's on the namespace is not ours to replay.
OPEN_RUNS = 'ExecutionStatus = "Running" AND WorkflowType IN ("AgentRun", "AgentRunBatch")'
# Core names the event it could not match: "... HistoryEvent(id: 9, ActivityTaskScheduled)".
_EVENT_ID = re.compile(r"HistoryEvent\(id: (\d+)")
# Events whose summary (the engine writes `step: what`) names the step they belong to.
_STEPPED = (EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, EventType.EVENT_TYPE_TIMER_STARTED)


@dataclass
class ReplayCheck:
    """One open run replayed with the installed code."""

    run_id: str
    replays: bool
    event_id: int | None = None  # the first event the new code does not match
    event_type: str | None = None
    step: str | None = None  # the spec step that event belongs to, where the history names it
    reason: str = ""

    def as_json(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v not in (None, "")}


def replayer(client: Client) -> Replayer:
    """A replayer with what a worker of this install runs: its workflows, runner and interceptors,
    and the client's converter (the worker's, with its large-value codec) for what histories hold."""
    from agentrun.worker import build, paths

    return Replayer(
        workflows=build.WORKFLOWS,
        workflow_runner=build.runner(),
        interceptors=paths.interceptors(),
        data_converter=client.data_converter,
        namespace=client.namespace,
    )


async def check(
    client: Client, query: str | None = None, progress: Callable[[int, int], None] | None = None
) -> list[ReplayCheck]:
    """Replay every open run (or those `query`, a visibility query, names among them). `progress`
    is told (done, total) after each. Raises UsageError for a query Temporal refuses."""
    wanted = f"{OPEN_RUNS} AND ({query})" if query else OPEN_RUNS
    try:
        ids = [wf.id async for wf in client.list_workflows(wanted)]
    except RPCError as exc:
        raise UsageError(f"Temporal cannot list runs with this query: {exc.message}") from None
    rep = replayer(client)
    results = []
    for done, run_id in enumerate(ids, 1):
        history = await client.get_workflow_handle(run_id).fetch_history()
        results.append(await check_history(rep, history))
        if progress:
            progress(done, len(ids))
    return results


async def check_history(rep: Replayer, history: WorkflowHistory) -> ReplayCheck:
    result = await rep.replay_workflow(history, raise_on_replay_failure=False)
    if result.replay_failure is None:
        return ReplayCheck(history.workflow_id, True)
    reason = str(result.replay_failure)
    found = _EVENT_ID.search(reason)
    event_id = int(found.group(1)) if found else None
    events = list(history.events)
    event = events[event_id - 1] if event_id and event_id <= len(events) else None
    return ReplayCheck(
        history.workflow_id,
        False,
        event_id,
        EventType.Name(event.event_type).removeprefix("EVENT_TYPE_") if event else None,
        step_at(events, event_id) if event_id else None,
        _short(reason),
    )


def step_at(events: list[HistoryEvent], event_id: int) -> str | None:
    """The step event `event_id` belongs to: its own summary's, else that of the first step the run
    scheduled from there on (what the workflow task that departs was doing), else of the last before."""
    later = [e for e in events if e.event_id >= event_id]
    earlier = [e for e in reversed(events) if e.event_id < event_id]
    for event in [*later, *earlier]:
        step = _step(event)
        if step:
            return step
    return None


def _step(event: HistoryEvent) -> str | None:
    if event.event_type not in _STEPPED or not event.user_metadata.summary.data:
        return None
    try:
        summary = json.loads(event.user_metadata.summary.data)
    except ValueError:
        return None
    return summary.split(": ", 1)[0] if isinstance(summary, str) else None


def _short(reason: str) -> str:
    """Core's failure, without the Rust structure it is wrapped in."""
    found = re.search(r'message: "([^"]*)"', reason)
    return found.group(1) if found else reason[:300]
