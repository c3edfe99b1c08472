"""Reading runs back from Temporal: their state, whether a worker is there, the list of runs."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from datetime import timedelta
from typing import Any

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.deployment.v1 import WorkerDeploymentOptions
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest, GetWorkflowExecutionHistoryReverseRequest
from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowQueryFailedError,
)
from temporalio.service import RPCError

from agentrun.client import no_worker
from agentrun.errors import NoSuchRun, NoWorker, UsageError
from agentrun.models import contract
from agentrun.models.contract import RunState, RunStatus, StepRecord

CLOSED_STATUS: dict[WorkflowExecutionStatus, RunStatus] = {
    WorkflowExecutionStatus.COMPLETED: "completed",
    WorkflowExecutionStatus.FAILED: "failed",
    WorkflowExecutionStatus.CANCELED: "cancelled",
    WorkflowExecutionStatus.TERMINATED: "terminated",
    WorkflowExecutionStatus.TIMED_OUT: "timeout",
}


# A run's handle: Temporal's, untyped, as the run is reached by name (its updates and queries name
# their own types).
RunHandle = WorkflowHandle[Any, Any]

QUERY_S = 5.0  # how long one state query waits for a worker
ANSWER_S = 0.25  # a worker that holds the run answers a query well within this
# After a worker dies the server sends its runs' queries to the dead worker's own (sticky) queue
# until it gives up on it, about 10 s; then a live worker on the run's task queue answers.
RESTART_PATIENCE_S = 25.0


async def describe(client: Client, run_id: str) -> WorkflowExecutionDescription:
    """The run's description; NoSuchRun if there is none with that id."""
    try:
        return await client.get_workflow_handle(run_id).describe()
    except RPCError as exc:
        raise NoSuchRun(f"no run with id '{run_id}' ({exc.message})") from None


async def running(client: Client, run_id: str) -> tuple[RunHandle, str]:
    """The handle and task queue of a run that can take an update or a cancellation: it exists (else
    NoSuchRun) and is still running (else UsageError)."""
    desc = await describe(client, run_id)
    if desc.status != WorkflowExecutionStatus.RUNNING:
        status = CLOSED_STATUS.get(desc.status, "ended") if desc.status else "ended"
        raise UsageError(f"run {run_id} has ended ({status}); there is nothing left to answer or cancel")
    return client.get_workflow_handle(run_id), desc.task_queue


async def fetch_state(client: Client, run_id: str, desc: WorkflowExecutionDescription | None = None) -> RunState:
    """The latest state of a run: by query while it runs, from its memo once it has ended. `desc`:
    the run's description, when the caller has it already."""
    desc = desc or await describe(client, run_id)
    if desc.status == WorkflowExecutionStatus.RUNNING:
        from agentrun.worker.versioning import build_of

        # A run pinned to a build is served by that build's workers only: others' polls say nothing.
        return await _running_state(client, client.get_workflow_handle(run_id), desc.task_queue, build_of(desc))
    state = await desc.memo_value("state", None, type_hint=RunState) or RunState(run_id=run_id)
    if desc.status is not None and desc.status in CLOSED_STATUS and state.status in ("pending", "running"):
        state.status = CLOSED_STATUS[desc.status]  # terminated from outside before it could say so
    if desc.status == WorkflowExecutionStatus.TERMINATED:
        state.errors.append(await _terminated_because(client, run_id))
    return state


async def fetch_step_log(client: Client, run_id: str, desc: WorkflowExecutionDescription) -> list[StepRecord]:
    """The run's step log, kept apart from its state: by query while it runs, from its memo once it
    has ended (a run recorded before kept it in its state, which fetch_state reads)."""
    if desc.status == WorkflowExecutionStatus.RUNNING:
        handle = client.get_workflow_handle(run_id)
        try:
            return await handle.query(
                contract.STEP_LOG, result_type=list[StepRecord], rpc_timeout=timedelta(seconds=QUERY_S)
            )
        except RPCError:
            raise NoWorker(f"no worker answered for run {run_id}, so its step log cannot be read") from None
    return await desc.memo_value(contract.STEP_LOG, [], type_hint=list[StepRecord])


async def _terminated_because(client: Client, run_id: str) -> str:
    """Who ended the run from outside (Temporal Web's Terminate, `temporal workflow terminate`), and why."""
    request = GetWorkflowExecutionHistoryReverseRequest(
        namespace=client.namespace, execution=WorkflowExecution(workflow_id=run_id), maximum_page_size=1
    )
    events = (await client.workflow_service.get_workflow_execution_history_reverse(request)).history.events
    attrs = events[0].workflow_execution_terminated_event_attributes if events else None
    reason = attrs.reason if attrs and attrs.reason else "no reason given"
    who = f" by {attrs.identity}" if attrs and attrs.identity else ""
    return f"the run was terminated from outside{who}: {reason}"


async def _running_state(client: Client, handle: RunHandle, task_queue: str, build: str | None = None) -> RunState:
    """The state from the worker that holds the run. While a live worker polls the run's queue (one
    that has just restarted), a failed query is asked again for a while rather than reported."""
    deadline = time.monotonic() + RESTART_PATIENCE_S
    while True:
        state, polled = await state_if_polled(client, handle, task_queue, build)
        if state:
            return state
        # A worker that polls but fails or sits on the run's work will not answer by waiting longer.
        if time.monotonic() >= deadline or not polled or await no_worker.stuck(client, handle.id):
            return await no_worker.state(client, handle.id, task_queue, polled)
        await asyncio.sleep(0.5)  # a query refused at once must not spin


async def state_if_polled(
    client: Client, handle: RunHandle, task_queue: str, build: str | None = None
) -> tuple[RunState | None, bool]:
    """The state, and whether a live worker polls the run's queue (of `build`, for a run pinned to
    one). A query a worker answers comes back in milliseconds; one that has not after ANSWER_S is
    dropped when nobody polls the queue, rather than waited out (QUERY_S)."""
    asked = asyncio.ensure_future(ask_state(handle))
    await asyncio.wait([asked], timeout=ANSWER_S)
    if asked.done() and asked.result() is not None:
        return asked.result(), True
    polled = await live_worker(client, task_queue, build)
    if polled or asked.done():
        return await asked, polled
    asked.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await asked
    return None, False


async def ask_state(handle: RunHandle, timeout_s: float = QUERY_S) -> RunState | None:
    """The state of a running run from the worker that holds it; None if no worker answered in time."""
    try:
        return await handle.query(contract.STATE, result_type=RunState, rpc_timeout=timedelta(seconds=timeout_s))
    except RPCError:
        return None


async def ask_held(handle: RunHandle, timeout_s: float = QUERY_S) -> str | None:
    """The run's status from the worker that holds it (a few bytes, not its state); None if no worker
    answered in time. A worker from before the `held` query is asked for the state instead."""
    try:
        return await handle.query(contract.HELD, result_type=str, rpc_timeout=timedelta(seconds=timeout_s))
    except WorkflowQueryFailedError:
        state = await ask_state(handle, timeout_s)
        return state.status if state else None
    except RPCError:
        return None


async def live_worker(client: Client, task_queue: str, build: str | None = None) -> bool:
    """True if a live worker (of `build`, `deployment:build`, where given) polls the queue (pollers
    of dead local processes are ignored); False where the server cannot tell."""
    try:
        return bool(await pollers(client, task_queue, build))
    except RPCError:  # a server that cannot describe queues: do not keep asking
        return False


async def pollers(client: Client, task_queue: str, build: str | None = None) -> list[str]:
    """The identities of the live workers polling the queue for workflow tasks (pid@host); with
    `build`, only those of that worker build (`deployment:build`)."""
    request = DescribeTaskQueueRequest(
        namespace=client.namespace,
        task_queue=TaskQueue(name=task_queue),
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
    )
    response = await client.workflow_service.describe_task_queue(request)
    now = time.time()
    return [
        poller.identity
        for poller in response.pollers
        if now - poller.last_access_time.ToSeconds() < 120
        and _process_alive(poller.identity)
        and (build is None or _build(poller.deployment_options) == build)
    ]


def _build(options: WorkerDeploymentOptions) -> str:
    return f"{options.deployment_name}:{options.build_id}"


def _process_alive(identity: str) -> bool:
    pid, _, host = identity.partition("@")
    if host != socket.gethostname() or not pid.isdigit():
        return True  # another machine: trust the server's record
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
