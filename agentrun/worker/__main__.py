"""Run a worker until SIGINT/SIGTERM, then shut down gracefully, within STOP_WITHIN_S at most."""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import signal
import sys
import threading

from agentrun import startup

with startup.loading():  # what a worker loads lives as long as it: later collections skip it
    from agentrun.activities.agents.agentapi import release_all
    from agentrun.activities.mcp.calls import close_connections
    from agentrun.activities.tools import wall
    from agentrun.errors import UserError
    from agentrun.worker import GRACEFUL_SHUTDOWN_S, STOP_WITHIN_S, logs, telemetry, terminal_log
    from agentrun.worker import args as worker_args
    from agentrun.worker.build import build_worker
    from agentrun.worker.connection import connect
    from agentrun.worker.versioning import first_current, from_options


async def main(args: argparse.Namespace) -> None:
    task_queue, log_format = args.task_queue, args.log_format
    logs.configure(log_format)
    async with telemetry.running(
        "agentrun-worker",
        args.metrics_port,
        forward_logs=log_format == "json",
        metrics_host=args.metrics_host,
    ):
        versioning = from_options(args.versioning, args.build_suffix, args.deployment)
        client = await connect()
        worker = build_worker(
            client,
            task_queue,
            args.max_concurrent_activities,
            max_cached_workflows=args.max_cached_workflows,
            versioning=versioning,
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, functools.partial(_stop_asked, stop, task_queue))
        async with worker:
            build = f" as build {versioning.build_id} of deployment {versioning.deployment}" if versioning else ""
            logs.announce(
                f"worker polling task queue '{task_queue}'{build} (Ctrl-C to stop)",
                "worker.started",
                task_queue=task_queue,
            )
            layers = await asyncio.to_thread(wall.announce)
            logs.announce(f"sandbox layers for bash and stdio MCP servers: {layers.describe()}", "worker.sandbox")
            if versioning and await first_current(client, versioning):
                logs.announce(
                    f"build {versioning.build_id} is current: new runs go to it (the deployment had none)",
                    "worker.promoted",
                    task_queue=task_queue,
                )
            await stop.wait()
        await release_all()  # refresh-mode agent servers this worker started
        await close_connections()  # and the MCP servers it started


def _stop_asked(stop: asyncio.Event, task_queue: str) -> None:
    """The first signal stops the worker, within STOP_WITHIN_S at most; a second ends it at once."""
    if stop.is_set():
        _exit_now("worker stopped at once (asked again)", "worker.killed", task_queue)
    stop.set()
    logs.announce(
        f"worker stopping: running activities have {GRACEFUL_SHUTDOWN_S:g} s to finish; exiting within "
        f"{STOP_WITHIN_S:g} s (again to stop at once)",
        "worker.stopping",
        task_queue=task_queue,
    )
    # A thread, not the event loop: what holds the worker up may hold the loop too.
    watchdog = threading.Timer(
        STOP_WITHIN_S,
        _exit_now,
        (f"worker did not stop within {STOP_WITHIN_S:g} s: exiting", "worker.killed", task_queue),
    )
    watchdog.daemon = True
    watchdog.start()


def _exit_now(message: str, event: str, task_queue: str) -> None:
    """End the process now: the server gives its runs' work to another worker (a running activity
    is retried after its heartbeat timeout)."""
    try:
        logs.announce(message, event, task_queue=task_queue)
        sys.stdout.flush()
        sys.stderr.flush()
    finally:  # whoever read the worker's output may be gone (a broken pipe): exit all the same
        os._exit(EXIT_FORCED)


EXIT_FORCED = 1  # a stop that did not finish in time


def run(args: argparse.Namespace) -> int:
    """Poll until SIGINT/SIGTERM; the exit code."""
    terminal_log.to_terminal(args.verbose)  # --log-format json replaces it once the worker starts
    try:
        asyncio.run(main(args))
    except UserError as exc:
        print(exc.message(), file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    code = run(worker_args.parser().parse_args())
    # The SDK's native threads can still be calling into Python while the interpreter finalizes,
    # which aborts the process now and then; all work is done here, so skip finalization.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
