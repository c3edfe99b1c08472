"""Reading runs back from Temporal: their state, whether a worker is there, the list of runs."""

from __future__ import annotations

import os
import socket
import time
from datetime import timedelta

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client, WorkflowExecutionDescription, WorkflowExecutionStatus, WorkflowHandle
from temporalio.service import RPCError

from workflows.contract import RunState, RunStatus

_CLOSED_STATUS: dict[WorkflowExecutionStatus, RunStatus] = {
    WorkflowExecutionStatus.COMPLETED: "completed",
    WorkflowExecutionStatus.FAILED: "failed",
    WorkflowExecutionStatus.CANCELED: "cancelled",
    WorkflowExecutionStatus.TERMINATED: "terminated",
    WorkflowExecutionStatus.TIMED_OUT: "timeout",
}


# What query_state reports when no worker holds the run, instead of hanging.
NO_WORKER = "no worker is answering for this run"


class NoSuchRun(Exception):
    pass


class UsageError(Exception):
    """A mistake on the command line (exit code 2)."""


async def describe(client: Client, run_id: str) -> WorkflowExecutionDescription:
    """The run's description; NoSuchRun if there is none with that id."""
    try:
        return await client.get_workflow_handle(run_id).describe()
    except RPCError as exc:
        raise NoSuchRun(f"no run with id '{run_id}' ({exc.message})") from None


async def fetch_state(client: Client, run_id: str) -> RunState:
    """The latest state of a run: by query while it runs, from its memo once it has ended."""
    desc = await describe(client, run_id)
    if desc.status == WorkflowExecutionStatus.RUNNING:
        return await query_state(client.get_workflow_handle(run_id))
    state = await desc.memo_value("state", None, type_hint=RunState) or RunState(run_id=run_id)
    if desc.status is not None and desc.status in _CLOSED_STATUS and state.status in ("pending", "running"):
        state.status = _CLOSED_STATUS[desc.status]  # terminated from outside before it could say so
    return state


async def query_state(handle: WorkflowHandle) -> RunState:
    """The state of a running run, asked of the worker that holds it."""
    try:
        return await handle.query("state", result_type=RunState, rpc_timeout=timedelta(seconds=5))
    except RPCError:
        # No worker answered: the run is waiting for one; say so instead of hanging.
        return RunState(run_id=handle.id, status="running", warnings=[NO_WORKER])


async def worker_polling(client: Client, task_queue: str) -> bool:
    """True if a live worker polls the queue. Pollers of dead local processes are ignored."""
    request = DescribeTaskQueueRequest(
        namespace=client.namespace,
        task_queue=TaskQueue(name=task_queue),
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
    )
    response = await client.workflow_service.describe_task_queue(request)
    now = time.time()
    for poller in response.pollers:
        recent = now - poller.last_access_time.ToSeconds() < 120
        if recent and _process_alive(poller.identity):
            return True
    return False


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


async def list_runs(client: Client, limit: int = 50) -> list[dict]:
    runs = []
    async for wf in client.list_workflows('WorkflowType="AgentRun"', limit=limit):
        attrs = wf.search_attributes or {}
        runs.append(
            {
                "run_id": wf.id,
                "status": attrs.get("AgentRunStatus", [wf.status.name.lower() if wf.status else ""])[0],
                "spec": (attrs.get("AgentRunSpec") or [""])[0],
                "started": wf.start_time.isoformat(timespec="seconds") if wf.start_time else "",
            }
        )
    return runs
