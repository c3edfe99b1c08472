"""`logs RUN [--task ID] [--follow]`: what was said to each agent and what it answered, in order,
from the run's history (`Run.conversation`). With --follow, a reply also shows as it grows (from the
call's heartbeats, `Run.so_far`), then whole once it ends."""

from __future__ import annotations

import argparse
import asyncio
import contextlib

from rich.console import Console

from agentrun.client.engine import Engine
from agentrun.client.models import Said
from agentrun.client.run import Run
from agentrun.errors import Unavailable

GROWING_POLL_S = 0.5


async def logs_command(engine: Engine, args: argparse.Namespace, console: Console) -> int:
    run = engine.run(args.run_id)
    await run.info()  # a clear error for a run that is not there
    shown = 0
    growing = _Growing(console, args.task)
    poller = asyncio.create_task(growing.follow(run)) if args.follow else None
    try:
        async for said in run.conversation(args.follow):
            if args.task and not belongs(said.task, args.task):
                continue
            shown += 1
            growing.said(said)
            console.print(render(said), markup=False, highlight=False)
    finally:
        if poller is not None:
            poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await poller
    if not shown:
        about = f" of task '{args.task}'" if args.task else ""
        console.print(f"no agent has been asked anything{about} in run {args.run_id}", markup=False)
    return 0


class _Growing:
    """Replies under way, printed as they grow under their prompt: a head line, then each new piece.
    The heartbeats run ahead of the history: a call's growth waits until its prompt is out, and a
    piece of another task's reply (side-by-side steps) starts on a line of its own under a head."""

    def __init__(self, console: Console, task: str | None) -> None:
        self.console, self.task = console, task
        self.asked: dict[str, int] = {}  # tasks whose prompt is out: the call it was (their count)
        self.calls: dict[str, int] = {}  # calls of each task that ended, so a late record is not taken
        self.printed: dict[str, int] = {}  # characters printed of each task's reply under way
        self.writing: str | None = None  # the task whose reply the last piece was of, mid-line

    async def follow(self, run: Run) -> None:
        while True:
            before = dict(self.calls)
            with contextlib.suppress(Unavailable):  # the server busy for a moment: the next look will do
                for record in (await run.so_far()).values():
                    if self.calls.get(record.task) != before.get(record.task):
                        continue  # its call ended while the records were read: they are of that call
                    if self.asked.get(record.task) == self.calls.get(record.task, 0):
                        self._grew(record.task, record.agent, record.tail, record.chars)
            await asyncio.sleep(GROWING_POLL_S)

    def _grew(self, task: str, agent: str, tail: str, chars: int) -> None:
        before = self.printed.get(task, 0)
        if chars <= before:
            return
        if self.writing != task:
            self.break_line()
            self._write(f"── {task} ← agent '{agent}' (writing)\n")
        new = chars - before
        self._write(tail[-new:] if new <= len(tail) else "…" + tail)
        self.printed[task], self.writing = chars, task

    def said(self, said: Said) -> None:
        """Before `said` is printed: a prompt opens its task's call, anything else ends it."""
        self.break_line()
        if said.kind == "prompt":
            self.asked[said.task] = self.calls.get(said.task, 0)
            return
        self.calls[said.task] = self.calls.get(said.task, 0) + 1
        self.asked.pop(said.task, None)
        self.printed.pop(said.task, None)

    def break_line(self) -> None:
        if self.writing is not None:
            self._write("\n")
            self.writing = None

    def _write(self, text: str) -> None:
        self.console.print(text, end="", markup=False, highlight=False, soft_wrap=True)


def belongs(task: str, wanted: str) -> bool:
    """`wanted` itself, one of its map elements (`score[2]`) or one of its sub-agents (`goal/agent-1`)."""
    return task == wanted or task.startswith((f"{wanted}[", f"{wanted}/"))


def render(said: Said) -> str:
    when = f"{said.at:%H:%M:%S}"
    if said.kind == "failed":
        return f"── {when} {said.task} ✗ agent '{said.agent}' failed: {said.text}\n"
    if said.kind == "tool":  # `agent` is the tool's name
        return f"── {when} {said.task} ⚒ {said.agent} {said.text}\n"
    if said.kind == "result":
        return f"── {when} {said.task} ⚒ {said.agent} → {said.text.rstrip()}\n"
    arrow = "→" if said.kind == "prompt" else "←"
    text = f"── {when} {said.task} {arrow} agent '{said.agent}' ({said.kind})\n{said.text.rstrip()}\n"
    if said.stderr:
        text += f"── stderr of agent '{said.agent}'\n{said.stderr.rstrip()}\n"
    return text
