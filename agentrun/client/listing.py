"""`client list`: recent runs, newest first, filtered by status or spec, as a table or JSON."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from rich.console import Console
from rich.table import Table
from temporalio.client import Client, WorkflowExecution, WorkflowExecutionStatus
from temporalio.service import RPCError

from agentrun import spelling
from agentrun.client.models import RunSummary
from agentrun.client.runs import CLOSED_STATUS, UsageError
from agentrun.models import contract, run_words

_LIVE = frozenset({"pending", "running", "waiting", "retrying"})
COLUMNS = ("RUN", "STATUS", "SPEC", "STARTED", "ENDED")


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


async def list_command(client: Client, args: argparse.Namespace, console: Console) -> int:
    if args.limit <= 0:
        raise UsageError(f"--limit {args.limit} is not above 0")
    query = visibility_query(args.status, args.spec)
    try:
        rows = [row(wf) async for wf in client.list_workflows(query, limit=args.limit)]
        total = (await client.count_workflows(query)).count
    except RPCError as exc:
        raise UsageError(f"Temporal cannot list runs with this filter: {exc.message}") from None
    more = f"showing {len(rows)} of {total} runs: --limit N shows more" if total > len(rows) else ""
    if args.json:
        print(json.dumps(rows, indent=2))
        if more:
            print(more, file=sys.stderr)
        return 0
    if not rows:
        console.print(_nothing(args), markup=False)
        return 0
    _table(console, rows)
    if more:
        console.print(more, markup=False)
    return 0


def summary(wf: WorkflowExecution) -> RunSummary:
    attrs = wf.search_attributes or {}
    return RunSummary(
        run_id=wf.id,
        status=status_of(wf.status, str((attrs.get(contract.STATUS.name) or [""])[0])),
        spec=str((attrs.get(contract.SPEC.name) or [""])[0]),
        started=wf.start_time,
        ended=wf.close_time,
    )


def row(wf: WorkflowExecution) -> dict[str, Any]:
    """A run as `list --json` prints it."""
    return as_row(summary(wf))


def as_row(run: RunSummary) -> dict[str, Any]:
    """A run as `list --json` prints it and the runs page shows it."""
    return {
        "run_id": run.run_id,
        "status": run.status,
        "spec": run.spec,
        "started": run.started.isoformat(timespec="seconds") if run.started else "",
        "ended": run.ended.isoformat(timespec="seconds") if run.ended else "",
    }


def status_of(execution: WorkflowExecutionStatus | None, said: str) -> str:
    """The run's own status, unless it ended without saying so (terminated, or before it started)."""
    closed = CLOSED_STATUS.get(execution) if execution is not None else None
    if closed and (not said or said in _LIVE):
        return closed
    return said or ("running" if execution == WorkflowExecutionStatus.RUNNING else "")


def _nothing(args: argparse.Namespace) -> str:
    filters = [f"--{name} {getattr(args, name)}" for name in ("status", "spec") if getattr(args, name)]
    return (
        "no runs match " + " ".join(filters)
        if filters
        else f"no runs yet: start one with `{spelling.client()} start SPEC`"
    )


def _table(console: Console, rows: list[dict[str, Any]]) -> None:
    table = Table(box=None, header_style="bold", pad_edge=False)
    for name in COLUMNS:
        table.add_column(name, no_wrap=True)
    for r in rows:
        table.add_row(
            r["run_id"], run_words.word(r["status"]), r["spec"], _when(r["started"]), _when(r["ended"]) or "-"
        )
    # Piped output keeps every cell whole; a terminal gets the table at its width.
    out = console if console.is_terminal else Console(file=console.file, width=10_000, highlight=False)
    out.print(table)


def _when(iso: str) -> str:
    return iso.replace("T", " ").replace("+00:00", " UTC")
