"""Run a worker until SIGINT/SIGTERM, then shut down gracefully."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys

from agentrun.activities.agents.agentapi import release_all
from agentrun.worker import logs, paths, telemetry, terminal_log
from agentrun.worker.blobs import BadBlobSetting
from agentrun.worker.build import TASK_QUEUE, build_worker
from agentrun.worker.connection import Unreachable, connect


async def main(args: argparse.Namespace) -> None:
    task_queue, log_format = args.task_queue, args.log_format
    logs.configure(log_format)
    async with telemetry.running("agentrun-worker", args.metrics_port, forward_logs=log_format == "json"):
        client = await connect()
        worker = build_worker(
            client,
            task_queue,
            args.max_concurrent_activities,
            max_cached_workflows=args.max_cached_workflows,
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        async with worker:
            logs.announce(
                f"worker polling task queue '{task_queue}' (Ctrl-C to stop)", "worker.started", task_queue=task_queue
            )
            await stop.wait()
            logs.announce("worker stopping: finishing running activities", "worker.stopping", task_queue=task_queue)
        await release_all()  # refresh-mode agent servers this worker started


def count(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number above 0")
    return int(text)


def port(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (1-65535)")
    return int(text)


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m worker", description=DESCRIPTION)
    add_arguments(parser)
    return run(parser.parse_args(argv))


DESCRIPTION = "Run an agentrun worker: it polls a task queue and runs the runs started on it."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--task-queue", default=TASK_QUEUE)
    parser.add_argument(
        "--max-concurrent-activities", type=count, default=100, metavar="N", help="agent calls and checks at once"
    )
    parser.add_argument(
        "--max-cached-workflows",
        type=count,
        default=1000,
        metavar="N",
        help="runs kept in memory between their steps (fewer: less memory, more replaying)",
    )
    parser.add_argument(
        "--metrics-port", type=port, metavar="PORT", help="serve Prometheus metrics at http://0.0.0.0:PORT/metrics"
    )
    parser.add_argument(
        "--log-format", choices=logs.FORMATS, default="text", help="json: one JSON object per line on stdout"
    )
    parser.add_argument("--verbose", action="store_true", help="log failures with their tracebacks")


def run(args: argparse.Namespace) -> int:
    """Poll until SIGINT/SIGTERM; the exit code."""
    terminal_log.to_terminal(args.verbose)  # --log-format json replaces it once the worker starts
    try:
        asyncio.run(main(args))
    except telemetry.TelemetryError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Unreachable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    except (paths.BadMapping, BadBlobSetting) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    code = cli()
    # The SDK's native threads can still be calling into Python while the interpreter finalizes,
    # which aborts the process now and then; all work is done here, so skip finalization.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
