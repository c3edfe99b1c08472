"""The arguments of `python -m worker` and `agentrun worker`."""

from __future__ import annotations

import argparse

from agentrun.models.names import TASK_QUEUE

DESCRIPTION = "Run an agentrun worker: it polls a task queue and runs the runs started on it."
LOG_FORMATS = ("text", "json")


def count(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number above 0")
    return int(text)


def port(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (1-65535)")
    return int(text)


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
        "--metrics-port", type=port, metavar="PORT", help="serve Prometheus metrics at http://127.0.0.1:PORT/metrics"
    )
    parser.add_argument(
        "--metrics-host",
        metavar="ADDRESS",
        help="the address metrics listen on (default 127.0.0.1; 0.0.0.0 lets any machine that reaches this one read them)",
    )
    parser.add_argument(
        "--log-format", choices=LOG_FORMATS, default="text", help="json: one JSON object per line on stdout"
    )
    parser.add_argument("--verbose", action="store_true", help="log failures with their tracebacks")
    versioning(parser)


def versioning(parser: argparse.ArgumentParser) -> None:
    """Worker Deployment Versioning (agentrun.worker.versioning): off unless asked for."""
    parser.add_argument(
        "--versioning",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="register this worker's build with Temporal; the runs it starts stay on it (default: AGENTRUN_VERSIONING, else off)",
    )
    parser.add_argument(
        "--build-suffix",
        metavar="TEXT",
        help="added to agentrun's version in the build id, e.g. your image tag (default: AGENTRUN_BUILD_SUFFIX)",
    )
    parser.add_argument(
        "--deployment",
        metavar="NAME",
        help="the worker deployment's name (default: AGENTRUN_DEPLOYMENT, else agentrun)",
    )


def parser(prog: str = "python -m worker") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=DESCRIPTION)
    add_arguments(p)
    return p
