"""`start` and `watch`: start a run from what `prepare` checked, run a worker in this process if none
is there, and follow the run to its report."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from rich.console import Console

from agentrun.cli.asking import Prompter
from agentrun.cli.follow import follow
from agentrun.client import endpoints, telemetry
from agentrun.client.engine import Engine
from agentrun.explain import outputs, report
from agentrun.explain.tails import STALL_S
from agentrun.explain.waiting import hint
from agentrun.ids import new_run_id
from agentrun.models.contract import RunInput
from agentrun.models.names import own_queue, run_queue
from agentrun.worker.embedded import state_dir


async def start(
    engine: Engine, args: argparse.Namespace, inp: RunInput, console: Console, prompter: Prompter | None = None
) -> int:
    args.id = args.id or new_run_id(inp.plan.name)  # Ctrl-C names it
    serving, _ = await asyncio.gather(engine.pollers(args.task_queue), engine.search_attributes())
    if serving or args.detach:
        return await _started(engine, args, inp, console, prompter, serving)
    args.task_queue = run_queue(args.task_queue, args.id)  # a queue of its own, which only this process's worker polls
    # This process's worker runs the run, with this environment: a model it cannot reach is said now.
    await endpoints.check(endpoints.uris(inp))
    # The worker is up before the run starts, so the server hands it the run's first workflow task
    # in its reply to the start (eager start) rather than through the queue.
    args.ran_worker = True
    async with local_worker(engine, args.task_queue, needed=True, run_id=args.id) as log:
        return await _started(engine, args, inp, console, prompter, serving, log)


async def _started(
    engine: Engine,
    args: argparse.Namespace,
    inp: RunInput,
    console: Console,
    prompter: Prompter | None,
    serving: list[str],
    log: Path | None = None,
) -> int:
    """Start the run on args.task_queue, say which worker runs it, and follow it unless detached;
    `log`: the log of this process's worker, when it runs the run."""
    with telemetry.starting(inp.plan, args.id):
        run = await engine.start_input(inp, args.id, args.task_queue, eager=log is not None)
    console.print(f"run {run.id} started", markup=False, highlight=False)
    link = engine.web_url(run.id)
    if link:
        console.print(f"Temporal Web: {link}", markup=False, highlight=False)
    if args.detach and not serving:
        console.print(hint(run.id, args.task_queue), markup=False)
        return 0
    console.print(_worker_line(engine, run.id, args.task_queue, serving), markup=False, highlight=False)
    if args.detach:
        return 0
    return await watch(engine, run.id, console, prompter, log, stall_s=getattr(args, "stall", None))


def _worker_line(engine: Engine, run_id: str, task_queue: str, serving: list[str]) -> str:
    """Which worker runs the run: those polling the shared queue, or this process on the run's own."""
    if serving:
        return f"worker: {', '.join(sorted(set(serving)))} (polling task queue '{task_queue}')"
    return worker_note(engine, run_id, task_queue)


def worker_note(engine: Engine, run_id: str, task_queue: str) -> str:
    """What `watch RUN --worker` says of the worker it runs: on the run's own queue it runs that run
    alone; on a shared queue it takes any run there while it polls."""
    if own_queue(task_queue, run_id):
        return f"worker: this process, {engine.identity} (the run's own task queue '{task_queue}')"
    return (
        f"worker: this process, {engine.identity}, polling the shared task queue '{task_queue}': "
        "while it runs it takes any run started there, not only this one"
    )


async def watch(
    engine: Engine,
    run_id: str,
    console: Console,
    prompter: Prompter | None = None,
    log: Path | None = None,
    stall_s: float | None = None,
) -> int:
    """Follow a run to its end and print its report; exit code 0 only for a completed run. An agent
    that writes nothing for `stall_s` seconds (default tails.STALL_S) is said to."""
    run = engine.run(run_id)
    final = await follow(run, console, prompter=prompter, log=log, stall_s=stall_s or STALL_S)
    console.print()
    text = report.to_markdown(final, await run.lost_workers()) + outputs.section(final, every=False)
    console.print(text, markup=False, highlight=False)
    return 0 if final.status == "completed" else 1


@contextlib.asynccontextmanager
async def local_worker(
    engine: Engine, task_queue: str, needed: bool, run_id: str = "worker"
) -> AsyncIterator[Path | None]:
    """A worker in this process while the block runs, if `needed`; its log goes to a file of the
    run's (yielded, else None), so retried failures do not fill the terminal with tracebacks."""
    if not needed:
        yield None
        return
    log = state_dir() / "logs" / f"{run_id}.log"
    async with engine.worker(task_queue, log=log):
        yield log
