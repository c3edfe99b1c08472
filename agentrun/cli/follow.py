"""Following a run: a line per task, gate and compensation event, a live status line on a terminal
with the reply so far of each running step under it (explain.tails), answering open gates inline when
a prompter is given, the final state."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console, Group
from rich.live import Live
from rich.spinner import Spinner

from agentrun.cli.asking import Prompter, answer_inline
from agentrun.client.models import Retry
from agentrun.client.run import Run
from agentrun.explain import tool_uses
from agentrun.explain.gates import gate_line
from agentrun.explain.tails import STALL_S, Tails
from agentrun.explain.waiting import hint
from agentrun.models import run_words
from agentrun.models.calls import Partial
from agentrun.models.contract import CompensationResult, Gate, RunState, TaskState, ToolUse, open_gates

_UNREACHABLE = ("ConnectError", "ConnectTimeout", "connection failed", "Connection refused")


async def follow(
    run: Run,
    console: Console,
    poll_s: float = 0.5,
    prompter: Prompter | None = None,
    log: Path | None = None,
    stall_s: float = STALL_S,
) -> RunState:
    """Print the run's events until it ends. With a prompter, each open question is put to it once;
    `log` is where the worker in this process writes the detail of failures; an agent that writes
    nothing for `stall_s` is said to, once."""
    info = await run.info()
    ended = asyncio.ensure_future(run.ended())
    printer = _Printer(console, run.id, log)
    asked: set[str] = set()
    started = time.monotonic()
    tails = Tails(stall_s)
    spinner = Spinner("dots", "starting…")
    with Live(Group(spinner, tails), console=console, transient=True, refresh_per_second=8) as status:
        while info.running and not ended.done():  # an ended run needs no worker to be shown
            look = await run.look()
            state = look.state
            if state is None:
                # A worker that has just restarted takes the run within seconds: only say so when none polls.
                if not look.polled:
                    printer.once(f"  ! {hint(run.id, info.task_queue)}")
                spinner.update(text=f"waiting for a worker · {time.monotonic() - started:.0f}s")
                await asyncio.wait([ended], timeout=poll_s)
                continue
            printer.show(state)
            running = {t.id for t in state.tasks.values() if t.status == "running"}
            so_far = await _under_way(run, printer) if running else {}
            warnings, grown = tails.update(so_far, running, console.is_terminal)
            printer.plain(warnings, style="yellow")
            printer.plain(grown)
            spinner.update(text=_live_line(state, time.monotonic() - started))
            # A budget is raised by figures, not a choice: its line says how; questions are asked here.
            gate = (
                next((g for g in open_gates(state) if g.id not in asked and g.kind != "budget"), None)
                if prompter
                else None
            )
            if gate and prompter:
                asked.add(gate.id)
                status.stop()  # the spinner would overwrite the question
                await answer_inline(run, gate, prompter, console)
                status.start()
                continue
            await asyncio.wait([ended], timeout=poll_s)
    final = await run.status()
    printer.show(final)
    return final


async def _under_way(run: Run, printer: _Printer) -> dict[str, Partial]:
    """Print the retries not shown yet; what each running agent has written so far."""
    now = await run.under_way()
    printer.retries([retry_line(retry) for retry in now.retries])
    return now.so_far


def retry_line(retry: Retry) -> str:
    """`↺ build: agent 'coder' unreachable, retry 1 of 4 in 1s (why)`."""
    task = retry.task or retry.activity
    what = f"agent '{retry.agent}'" if retry.agent else retry.activity
    how = "unreachable" if any(mark in retry.why for mark in _UNREACHABLE) else "failed"
    retries = f"retry {retry.attempt - 1}"
    if retry.maximum_attempts:
        retries += f" of {retry.maximum_attempts - 1}"
    if retry.retry_in_s is not None:
        # The server may schedule a hair past the backoff (8.00001 s): tenths are what a person reads.
        retries += f" in {round(retry.retry_in_s, 1):g}s"
    return f"  ↺ {task}: {what} {how}, {retries} ({retry.why})"


def _live_line(state: RunState, elapsed: float) -> str:
    if state.status == "waiting":
        return f"waiting for {state.waiting_for or 'a person'} · {elapsed:.0f}s"
    task = state.tasks.get(state.current_task or "")
    if not task:
        return f"{run_words.word(state.status)} · {elapsed:.0f}s"
    return f"{task.id} · attempt {task.attempts} · iteration {task.iterations} · {elapsed:.0f}s elapsed"


class _Printer:
    """Prints what changed since the last state it saw, so each event shows once."""

    def __init__(self, console: Console, run_id: str, log: Path | None = None):
        self.console = console
        self.run_id = run_id
        self.log = log
        self.seen: dict[str, tuple] = {}
        self.gates: dict[str, str] = {}
        self.warnings = 0
        self.compensations = 0
        self.said: set[str] = set()
        self.tools: dict[str, int] = {}  # tool calls shown, by step
        self.failed_now: set[str] = set()  # steps found failed in this poll, whose log is pointed at

    def show(self, state: RunState) -> None:
        # Steps and gates that changed since the last poll, in the order they happened: a gate
        # answered before the step after it ran is told before that step's end.
        changed = [self._task(task) for task in state.tasks.values()] + [self._gate(g) for g in state.gates.values()]
        for _, lines in sorted((c for c in changed if c[1]), key=lambda c: c[0]):
            for line in lines:
                self._print(line)
        if self.failed_now:
            self._point_at_log()
        self.failed_now = set()
        for key, uses in state.tool_calls.items():
            self._tools(key, uses)
        for result in state.compensations[self.compensations :]:
            self._print(_compensation(result))
        self.compensations = len(state.compensations)
        for warning in state.warnings[self.warnings :]:
            self.console.print(_indented(f"  ! {warning}"), style="yellow", markup=False, highlight=False)
        self.warnings = len(state.warnings)

    def _tools(self, key: str, uses: list[ToolUse]) -> None:
        """Each tool call once it has ended, in the order made."""
        done = self.tools.get(key, 0)
        for use in uses[done:]:
            if use.outcome == "running":
                break
            self._print(f"  ⚒ {key}: {tool_uses.line(use)}")
            done += 1
        self.tools[key] = done

    def retries(self, lines: list[str]) -> None:
        for line in lines:
            self._print(line)
            self._point_at_log()

    def _point_at_log(self) -> None:
        if self.log and self.log.exists():  # the worker logged something
            self.once(f"    full detail in {self.log}")

    def once(self, line: str) -> None:
        if line not in self.said:
            self.said.add(line)
            self.console.print(line, style="yellow", markup=False, highlight=False)

    def _gate(self, gate: Gate) -> tuple[datetime, list[str]]:
        if self.gates.get(gate.id) == gate.status:
            return _LATEST, []
        self.gates[gate.id] = gate.status
        if gate.status == "open":
            return _when(gate.opened_at), [gate_line(self.run_id, gate)]
        return _when(gate.answer.at if gate.answer else None), [_closed(gate)]

    def _print(self, line: str) -> None:
        self.console.print(line, markup=False, highlight=False)

    def plain(self, lines: list[str], style: str | None = None) -> None:
        for line in lines:
            self.console.print(line, style=style, markup=False, highlight=False, soft_wrap=True)

    def _task(self, task: TaskState) -> tuple[datetime, list[str]]:
        before = self.seen.get(task.id, ("pending", 0, 0))
        now = (task.status, task.attempts, task.iterations)
        if now == before:
            return _LATEST, []
        self.seen[task.id] = now
        if task.status == "failed":
            self.failed_now.add(task.id)
        return _when(task.ended_at or task.started_at), _events(task, before)


# A change with no time of its own is told after those that have one (in the order found).
_LATEST = datetime.max.replace(tzinfo=UTC)


def _when(moment: datetime | None) -> datetime:
    if moment is None:
        return _LATEST
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


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


def _events(task: TaskState, before: tuple) -> list[str]:
    """Every step between two states of a task, however many a poll missed: its start line, each
    attempt and each loop round, then how it ended."""
    status, attempts, iterations = before
    if task.reused_from and status == "pending":
        failed = " (it failed there)" if task.status == "failed" else ""
        return [f"↷ {task.id} reused from {task.reused_from}{failed}"]
    lines = []
    ran_unseen = status == "pending" and task.attempts > 0
    if status != "running" and (task.status == "running" or ran_unseen):
        lines.append(f"▶ {task.id} ({task.agent})")
    lines += [f"  ↺ {task.id} attempt {n}" for n in range(max(attempts + 1, 2), task.attempts + 1)]
    if task.iterations != task.attempts:  # one prompt per attempt is no loop: its attempt lines say it all
        lines += [f"  ↻ {task.id} iteration {n}" for n in range(max(iterations + 1, 2), task.iterations + 1)]
    if task.status == "completed":
        lines.append(f"✓ {task.id} done in {task.duration_s:.1f}s")
    elif task.status == "failed":
        lines.append(_indented(f"✗ {task.id} failed: {task.error}"))
    elif task.status == "not_taken":  # the spec routed its failure: a selector's next alternative, a fallback
        lines.append(_indented(f"↷ {task.id} not taken: {task.error}"))
    elif task.status in ("skipped", "cancelled"):
        lines.append(f"- {task.id} {task.status}")
    return lines


def _indented(line: str) -> str:
    """A many-line message under its first line, so the next event still stands out."""
    first, *rest = line.splitlines() or [""]
    return "\n".join([first, *(f"      {more}" for more in rest)])
