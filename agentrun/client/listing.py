"""Listing runs (`list`, the runs page): the visibility query for a filter, and each run's summary."""

from __future__ import annotations

import json

from temporalio.client import WorkflowExecution, WorkflowExecutionStatus

from agentrun.client.models import RunSummary
from agentrun.client.runs import CLOSED_STATUS
from agentrun.models import contract

_LIVE = frozenset({"pending", "running", "waiting", "retrying"})


def visibility_query(status: str | None, spec: str | None) -> str:
    """The Temporal list filter for the options. A run ended from outside (terminated) never wrote
    its own status, so the server's execution status decides for it and for the live ones."""
    # A run that continued as new is one run: only its latest execution is listed.
    parts = [f'WorkflowType="{contract.WORKFLOW}"', 'ExecutionStatus!="ContinuedAsNew"']
    if spec:
        parts.append(f"{contract.SPEC.name}={json.dumps(spec)}")
    if status == "terminated":
        parts.append('ExecutionStatus="Terminated"')
    elif status:
        parts.append(f"{contract.STATUS.name}={json.dumps(status)}")  # quoted: a value cannot widen the query
        if status in _LIVE:
            parts.append('ExecutionStatus="Running"')
    return " AND ".join(parts)


def summary(wf: WorkflowExecution) -> RunSummary:
    attrs = wf.search_attributes or {}
    return RunSummary(
        run_id=wf.id,
        status=status_of(wf.status, str((attrs.get(contract.STATUS.name) or [""])[0])),
        spec=str((attrs.get(contract.SPEC.name) or [""])[0]),
        started=wf.start_time,
        ended=wf.close_time,
        # Temporal's own attribute, set for runs of versioned workers: `deployment:build`
        build=str((attrs.get("TemporalWorkerDeploymentVersion") or [""])[0]),
    )


def status_of(execution: WorkflowExecutionStatus | None, said: str) -> str:
    """The run's own status, unless it ended without saying so (terminated, or before it started)."""
    closed = CLOSED_STATUS.get(execution) if execution is not None else None
    if closed and (not said or said in _LIVE):
        return closed
    return said or ("running" if execution == WorkflowExecutionStatus.RUNNING else "")
