"""Following a run: a line per task event, a live status line on a terminal, the final state."""

from __future__ import annotations

import asyncio
import time

from rich.console import Console
from temporalio.client import Client, WorkflowFailureError

from client.runs import fetch_state, query_state
from workflows.state import RunState, TaskState


async def follow(client: Client, run_id: str, console: Console, poll_s: float = 0.5) -> RunState:
    handle = client.get_workflow_handle(run_id)
    ended = asyncio.ensure_future(_wait(handle))
    printer = _Printer(console)
    started = time.monotonic()
    with console.status("starting…") as status:
        while not ended.done():
            state = await query_state(handle)
            printer.show(state)
            status.update(_live_line(state, time.monotonic() - started))
            await asyncio.wait([ended], timeout=poll_s)
    final = await fetch_state(client, run_id)
    printer.show(final)
    return final


async def _wait(handle) -> None:
    try:
        await handle.result()
    except WorkflowFailureError:
        pass  # the state says why; the report shows it


def _live_line(state: RunState, elapsed: float) -> str:
    task = state.tasks.get(state.current_task or "")
    if not task:
        return f"{state.status} · {elapsed:.0f}s"
    return (f"{task.id} · attempt {task.attempts} · iteration {task.iterations} · "
            f"{elapsed:.0f}s elapsed")


class _Printer:
    """Prints what changed since the last state it saw, so each event shows once."""

    def __init__(self, console: Console):
        self.console = console
        self.seen: dict[str, tuple] = {}
        self.warnings = 0

    def show(self, state: RunState) -> None:
        for task in state.tasks.values():
            self._task(task)
        for warning in state.warnings[self.warnings:]:
            self.console.print(f"  ! {warning}", style="yellow", markup=False, highlight=False)
        self.warnings = len(state.warnings)

    def _task(self, task: TaskState) -> None:
        before = self.seen.get(task.id, ("pending", 0, 0))
        now = (task.status, task.attempts, task.iterations)
        if now == before:
            return
        self.seen[task.id] = now
        line = _event(task, before)
        if line:
            self.console.print(line, markup=False, highlight=False)


def _event(task: TaskState, before: tuple) -> str | None:
    status, attempts, iterations = before
    if task.status == "running" and status != "running":
        return f"▶ {task.id} ({task.agent})"
    if task.status == "running" and task.attempts > attempts:
        return f"  ↺ {task.id} attempt {task.attempts}"
    if task.status == "running" and task.iterations > iterations:
        return f"  ↻ {task.id} iteration {task.iterations}"
    if task.status == "completed":
        return f"✓ {task.id} done in {task.duration_s:.1f}s"
    if task.status == "failed":
        return f"✗ {task.id} failed: {task.error}"
    if task.status in ("skipped", "cancelled"):
        return f"- {task.id} {task.status}"
    return None
