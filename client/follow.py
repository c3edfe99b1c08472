"""Following a run: a line per task, gate and compensation event, a live status line on a terminal,
answering open gates inline when a prompter is given, the final state."""

from __future__ import annotations

import asyncio
import time

from rich.console import Console
from temporalio.client import Client, WorkflowFailureError

from client.humans import Prompter, answer_inline, gate_line
from client.runs import NO_WORKER, ask_state, describe, fetch_state, live_worker, worker_command
from workflows.contract import CompensationResult, Gate, RunState, TaskState, open_gates


async def follow(
    client: Client, run_id: str, console: Console, poll_s: float = 0.5, prompter: Prompter | None = None
) -> RunState:
    """Print the run's events until it ends. With a prompter, each open question is put to it once."""
    handle = client.get_workflow_handle(run_id)
    queue = (await describe(client, run_id)).task_queue
    ended = asyncio.ensure_future(_wait(handle))
    printer = _Printer(console, run_id)
    asked: set[str] = set()
    started = time.monotonic()
    with console.status("starting…") as status:
        while not ended.done():
            state = await ask_state(handle)
            if state is None:
                # A worker that has just restarted takes the run within seconds: only say so when none polls.
                if not await live_worker(client, queue):
                    printer.once(f"  ! {NO_WORKER}: start one with `{worker_command(queue)}`")
                status.update(f"waiting for a worker · {time.monotonic() - started:.0f}s")
                await asyncio.wait([ended], timeout=poll_s)
                continue
            printer.show(state)
            status.update(_live_line(state, time.monotonic() - started))
            # A budget is raised by figures, not a choice: its line says how; questions are asked here.
            gate = (
                next((g for g in open_gates(state) if g.id not in asked and g.kind != "budget"), None)
                if prompter
                else None
            )
            if gate and prompter:
                asked.add(gate.id)
                status.stop()  # the spinner would overwrite the question
                await answer_inline(handle, gate, prompter, console)
                status.start()
                continue
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
    if state.status == "waiting":
        return f"waiting for {state.waiting_for or 'a person'} · {elapsed:.0f}s"
    task = state.tasks.get(state.current_task or "")
    if not task:
        return f"{state.status} · {elapsed:.0f}s"
    return f"{task.id} · attempt {task.attempts} · iteration {task.iterations} · {elapsed:.0f}s elapsed"


class _Printer:
    """Prints what changed since the last state it saw, so each event shows once."""

    def __init__(self, console: Console, run_id: str):
        self.console = console
        self.run_id = run_id
        self.seen: dict[str, tuple] = {}
        self.gates: dict[str, str] = {}
        self.warnings = 0
        self.compensations = 0
        self.said: set[str] = set()

    def show(self, state: RunState) -> None:
        for task in state.tasks.values():
            self._task(task)
        for gate in state.gates.values():
            self._gate(gate)
        for result in state.compensations[self.compensations :]:
            self._print(_compensation(result))
        self.compensations = len(state.compensations)
        for warning in state.warnings[self.warnings :]:
            self.console.print(f"  ! {warning}", style="yellow", markup=False, highlight=False)
        self.warnings = len(state.warnings)

    def once(self, line: str) -> None:
        if line not in self.said:
            self.said.add(line)
            self.console.print(line, style="yellow", markup=False, highlight=False)

    def _gate(self, gate: Gate) -> None:
        if self.gates.get(gate.id) == gate.status:
            return
        self.gates[gate.id] = gate.status
        self._print(gate_line(self.run_id, gate) if gate.status == "open" else _closed(gate))

    def _print(self, line: str) -> None:
        self.console.print(line, markup=False, highlight=False)

    def _task(self, task: TaskState) -> None:
        before = self.seen.get(task.id, ("pending", 0, 0))
        now = (task.status, task.attempts, task.iterations)
        if now == before:
            return
        self.seen[task.id] = now
        line = _event(task, before)
        if line:
            self._print(line)


def _closed(gate: Gate) -> str:
    answer = gate.answer
    if gate.status == "timed_out":
        taken = f": taken as {answer.value}" if answer and answer.value is not None else ""
        return f"  ! gate {gate.id} timed out{taken}"
    who = f" by {answer.by}" if answer and answer.by else ""
    comment = f" ({answer.comment})" if answer and answer.comment else ""
    return f"✓ gate {gate.id} answered: {answer.value if answer else ''}{who}{comment}"


def _compensation(result: CompensationResult) -> str:
    if result.status == "completed":
        return f"↶ {result.action_id} compensated"
    return f"✗ compensation of {result.action_id} failed: {result.error}"


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
