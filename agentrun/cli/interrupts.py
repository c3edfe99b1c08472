"""Ctrl-C in the command line: the first stops what the command does (a worker in this process gets
a few seconds to let running agent calls end), a second leaves at once; either way one message says
what became of the run, and the exit code is 130.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import Coroutine
from typing import Any

from rich.console import Console

from agentrun import spelling
from agentrun.explain.waiting import worker_command
from agentrun.worker import GRACEFUL_SHUTDOWN_S

EXIT_INTERRUPTED = 130


def run(main: Coroutine[Any, Any, int], args: argparse.Namespace) -> int:
    """asyncio.run(main), with Ctrl-C handled as above; KeyboardInterrupt after the first one."""
    return asyncio.run(_guarded(main, args))


async def _guarded(main: Coroutine[Any, Any, int], args: argparse.Namespace) -> int:
    task = asyncio.ensure_future(main)
    loop = asyncio.get_running_loop()
    presses = 0

    def pressed() -> None:
        nonlocal presses
        presses += 1
        if presses == 1:
            if ran_worker(args):
                print(
                    f"stopping the worker in this process: agent calls it runs get up to {GRACEFUL_SHUTDOWN_S:g}s "
                    "to end (Ctrl-C again to leave now)",
                    file=sys.stderr,
                    flush=True,
                )
            task.cancel()
            return
        Console(stderr=True).show_cursor(True)  # a live status line had hidden it
        print(farewell(args), file=sys.stderr, flush=True)
        os._exit(EXIT_INTERRUPTED)

    loop.add_signal_handler(signal.SIGINT, pressed)
    try:
        return await task
    except asyncio.CancelledError:
        if presses:
            raise KeyboardInterrupt from None
        raise
    finally:
        loop.remove_signal_handler(signal.SIGINT)


def ran_worker(args: argparse.Namespace) -> bool:
    """Whether this command ran the run's worker itself (`start` when none polled, `watch --worker`)."""
    return bool(getattr(args, "ran_worker", False))


def farewell(args: argparse.Namespace) -> str:
    """What became of the run this command followed, if any, and how to pick it up again."""
    run_id = getattr(args, "id", None) if args.command in ("start", "fork") else getattr(args, "run_id", None)
    if args.command not in ("start", "fork", "watch") or not run_id:
        return "interrupted"
    if not ran_worker(args):
        return f"interrupted: run {run_id} goes on in Temporal; follow it with `{spelling.client()} watch {run_id}`"
    queue = args.task_queue
    return (
        f"interrupted: run {run_id} stays in Temporal, but the worker in this process has stopped: nothing runs "
        f"it unless another worker polls task queue '{queue}'\n"
        f"  hint: go on with `{spelling.client()} watch {run_id} --worker`, or start a worker with "
        f"`{worker_command(queue)}` and `{spelling.client()} watch {run_id}`"
    )
