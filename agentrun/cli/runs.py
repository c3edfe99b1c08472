"""The commands about runs: start, fork, diff, watch, cancel, status, list, report, logs."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import TYPE_CHECKING, Any

from rich.console import Console

from agentrun import startup
from agentrun.cli.args import EXIT_OK, command, on_temporal, positive, prompter, run_status, spec_and_inputs
from agentrun.models.names import TASK_QUEUE
from agentrun.models.run_words import WORDS

if TYPE_CHECKING:
    from agentrun.client.engine import Engine

LIST_LIMIT = 50
ELEMENTS_LIMIT = 50


def add_commands(sub: Any) -> None:
    _start(command(sub, "start", "start a run of a spec and follow it", _start_command))
    _fork(command(sub, "fork", "run a run's plan again from a step, reusing the steps before it", _fork_command))
    d = command(sub, "diff", "the steps whose output, status or cost differ between two runs", on_temporal(_diff))
    d.add_argument("run_a")
    d.add_argument("run_b")
    d.add_argument("--json", action="store_true")
    w = command(sub, "watch", "follow a run to its end", on_temporal(_watch))
    w.add_argument("run_id")
    w.add_argument("--worker", action="store_true", help="run a worker in this process while following")
    _stall(w)
    c = command(sub, "cancel", "cancel a run", on_temporal(_cancel))
    c.add_argument("run_id")
    c.add_argument("--rollback", action="store_true", help="run its compensations as it is cancelled")
    st = command(sub, "status", "a run's state", on_temporal(_status))
    st.add_argument("run_id")
    st.add_argument("--json", action="store_true")
    _elements(st)
    _list(command(sub, "list", "recent runs, newest first", on_temporal(_list_runs)))
    r = command(sub, "report", "a run's execution report", on_temporal(_report))
    r.add_argument("run_id")
    r.add_argument("--format", choices=["md", "json"], default="md")
    r.add_argument("--outputs", action="store_true", help="add each step's output in full")
    _elements(r)
    lg = command(sub, "logs", "what each agent was asked and answered, in order", on_temporal(_logs))
    lg.add_argument("run_id")
    lg.add_argument("--task", metavar="ID", help="only this task (with its map elements and sub-agents)")
    lg.add_argument("--follow", action="store_true", help="keep printing until the run ends")


def _stall(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--stall",
        type=positive,
        metavar="SECONDS",
        help="say when an agent has written nothing for this long (default 120); the step goes on",
    )


def _start(s: argparse.ArgumentParser) -> None:
    spec_and_inputs(s)
    _stall(s)
    s.add_argument("--workdir", help="where agents and checks run (default: the spec's folder)")
    s.add_argument("--id", help="the run id (default: spec name + random suffix)")
    s.add_argument("--detach", action="store_true", help="start and return at once")
    s.add_argument("--resume-from", metavar="TASK", help="skip every task before TASK")
    s.add_argument("--max-iterations", type=positive, metavar="N", help="loop limit for tasks that set none")
    s.add_argument("--lenient", action="store_true", help="accept replies without a completion status")
    s.add_argument("--task-queue", default=TASK_QUEUE, help="the task queue workers poll")
    s.add_argument(
        "--no-human",
        action="store_true",
        help="no person can answer this run: refuse a spec whose goals need human supervision",
    )


def _fork(f: argparse.ArgumentParser) -> None:
    f.add_argument("run_id", help="the run to fork")
    f.add_argument(
        "--at",
        required=True,
        metavar="STEP",
        help="the step to go on from (STEP[i]#N for a map element, a round); `failure` for the step that failed",
    )
    f.add_argument(
        "-p", "--param", action="append", default=[], metavar="KEY=VALUE", help="a param to change (YAML scalar)"
    )
    f.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="memory.KEY=VALUE",
        help="a memory (blackboard) value to set where the fork goes on (YAML)",
    )
    f.add_argument(
        "--prompt", action="append", default=[], metavar="STEP=TEXT", help="a new prompt (template) for an agent step"
    )
    f.add_argument(
        "--spec",
        metavar="FILE",
        help="run this changed spec instead of the run's own plan; the steps taken over are matched by id",
    )
    f.add_argument("--id", help="the new run's id (default: spec name + random suffix)")
    f.add_argument("--detach", action="store_true", help="start and return at once")
    f.add_argument("--task-queue", help="the task queue workers poll (default: the parent's)")


def _elements(command: argparse.ArgumentParser) -> None:
    command.add_argument("--elements", metavar="MAP", help="page through the elements of map step MAP")
    command.add_argument("--page", type=positive, metavar="N", help="which page of elements (default 1)")
    command.add_argument("--limit", type=positive, metavar="N", help=f"elements per page (default {ELEMENTS_LIMIT})")


def _list(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--status",
        type=run_status,
        metavar="STATUS",
        help="only runs with this status: " + ", ".join(WORDS.values()).lower(),
    )
    command.add_argument("--spec", metavar="NAME", help="only runs of the spec with this name")
    command.add_argument(
        "--limit", type=int, default=LIST_LIMIT, metavar="N", help=f"at most N runs (default {LIST_LIMIT})"
    )
    command.add_argument("--json", action="store_true", help="a JSON list of the runs")


def _serving_models() -> None:
    """Build the IR's models before the run contract is imported, in a command that may serve its run
    (start, fork): the contract's models then reuse their schemas instead of building them inline
    (≈ 80 ms of CPU); the worker's interpreter finds them built (`ir.build_models` runs once)."""
    from agentrun.lang import ir

    ir.build_models()


def _start_command(args: argparse.Namespace, console: Console) -> int:
    with startup.loading():
        _serving_models()
        from agentrun.explain.prepare import prepare, say_warnings

        inp = prepare(args)  # a bad spec is refused before Temporal is reached
    say_warnings(inp.plan)

    async def started(engine: Engine, args: argparse.Namespace, console: Console) -> int:
        from agentrun.cli.starting import start

        return await start(engine, args, inp, console, prompter(console))

    return on_temporal(started)(args, console)


def _fork_command(args: argparse.Namespace, console: Console) -> int:
    with startup.loading():
        _serving_models()
    return on_temporal(_forked)(args, console)


async def _forked(engine: Engine, args: argparse.Namespace, console: Console) -> int:
    """`fork RUN --at STEP`: a new run of RUN's plan that takes over, from RUN's record, every step
    before STEP (no agent is asked, nothing is spent), makes the changes given and goes on from STEP."""
    from agentrun.cli.starting import start
    from agentrun.explain.changes import from_options

    wanted = dataclasses.replace(from_options(args.param, args.set, args.prompt), spec=args.spec)
    planned = await engine.run(args.run_id).prepare_fork(args.at, wanted, args.task_queue)
    for note in planned.notes:
        print(f"note: {note}", file=sys.stderr)
    for warning in planned.warnings:
        print(warning, file=sys.stderr)
    fork = planned.input.fork
    taken = len(fork.reuse) if fork else 0
    console.print(
        f"forking {args.run_id} at {fork.at if fork else args.at}: {taken} step run(s) taken over, not run again",
        markup=False,
        highlight=False,
    )
    args.task_queue = planned.task_queue
    return await start(engine, args, planned.input, console, prompter(console))


async def _diff(engine: Engine, args: argparse.Namespace, console: Console) -> int:
    from agentrun.cli.reading import diff_command

    return await diff_command(engine, args, console)


async def _watch(engine: Engine, args: argparse.Namespace, console: Console) -> int:
    from agentrun.cli.starting import local_worker, watch, worker_note

    args.task_queue = (await engine.run(args.run_id).info()).task_queue
    args.ran_worker = args.worker
    if args.worker:
        print(worker_note(engine, args.run_id, args.task_queue), file=sys.stderr)
    async with local_worker(engine, args.task_queue, needed=args.worker, run_id=args.run_id) as log:
        return await watch(engine, args.run_id, console, prompter(console), log, stall_s=args.stall)


async def _cancel(engine: Engine, args: argparse.Namespace, console: Console) -> int:
    queued = await engine.run(args.run_id).cancel(rollback=args.rollback)
    if queued is not None:
        console.print(
            f"rollback requested for {args.run_id}: {queued} compensation(s) queued, run as it is cancelled",
            markup=False,
        )
    console.print(f"cancellation requested for {args.run_id}", markup=False)
    return EXIT_OK


async def _status(engine: Engine, args: argparse.Namespace, console: Console) -> int:
    from agentrun.cli.reading import status_command

    return await status_command(engine, args, console)


async def _list_runs(engine: Engine, args: argparse.Namespace, console: Console) -> int:
    from agentrun.cli.reading import list_command

    return await list_command(engine, args, console)


async def _report(engine: Engine, args: argparse.Namespace, console: Console) -> int:
    from agentrun.cli.reading import report_command

    return await report_command(engine, args, console)


async def _logs(engine: Engine, args: argparse.Namespace, console: Console) -> int:
    from agentrun.cli.logs import logs_command

    return await logs_command(engine, args, console)
