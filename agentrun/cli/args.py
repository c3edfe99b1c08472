"""What the commands share: argument types, the spec-and-inputs arguments, how an answer is
delivered, and running a command that talks to Temporal. Heavy modules load inside the functions
that need them, so `--help` and the spec commands start without them."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from rich.console import Console

if TYPE_CHECKING:
    from agentrun.cli.asking import Prompter
    from agentrun.client.engine import Engine

EXIT_OK = 0  # 1, a failed run, comes from `watch`; 2 and 3 from agentrun.errors

Handler = Callable[[argparse.Namespace, Console], int]
EngineAction = Callable[["Engine", argparse.Namespace, Console], Awaitable[int]]


def run_status(text: str) -> str:
    """A run's status, as the list's STATUS column words it (`complete`, `rolled back`) or as JSON
    gives it (`completed`, `compensated`)."""
    from agentrun.models import run_words

    found = run_words.status_of(text)
    if found is None:
        said = ", ".join(w.lower() for w in run_words.WORDS.values())
        raise argparse.ArgumentTypeError(f"{text!r} is not a run status; one of: {said}")
    return found


def positive(text: str) -> int:
    """A whole number above 0, for limits: argparse says why it refused anything else."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{value} is not above 0")
    return value


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value < 0:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of seconds")
    return value


def spec_and_inputs(command: argparse.ArgumentParser) -> None:
    """The arguments `start` and `dry-run` share: the spec, its params and its agents."""
    command.add_argument("spec")
    command.add_argument(
        "-p",
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a param (YAML scalar), or KEY=@FILE to read it from a file",
    )
    command.add_argument(
        "--agent",
        action="append",
        default=[],
        metavar="URI|ID=URI",
        help="the default agent URI, or the URI of one agent id",
    )


def delivery(command: argparse.ArgumentParser) -> None:
    """Who answers, and how an answer reaches a run no worker holds right now: wait for one, or queue it."""
    command.add_argument(
        "--as", dest="by", metavar="NAME", help="who is answering, kept with the answer (default: your OS user name)"
    )
    how = command.add_mutually_exclusive_group()
    how.add_argument(
        "--wait",
        type=seconds,
        default=60.0,
        metavar="SECONDS",
        help="how long to wait for a worker to take it (default 60); exit code 3 if none did",
    )
    how.add_argument(
        "--no-wait",
        action="store_true",
        help="queue it in the run's history and return; the run checks it when a worker takes it",
    )


def prompter(console: Console) -> Prompter | None:
    """Open questions are asked inline only of a person at a terminal."""
    from agentrun.cli.asking import terminal_prompter

    return terminal_prompter(console) if sys.stdin.isatty() else None


def whole(console: Console) -> Console:
    """Where a table goes: the console on a terminal; piped, a console so wide every cell stays whole."""
    return console if console.is_terminal else Console(file=console.file, width=10_000, highlight=False)


def when(iso: str | None) -> str:
    """An ISO moment as a table shows it: `2026-11-27 19:00:00 UTC`."""
    return iso.replace("T", " ").replace("+00:00", " UTC") if iso else ""


def on_temporal(action: EngineAction) -> Handler:
    """A command that talks to Temporal: connect (with telemetry), run `action` on the engine,
    Ctrl-C handled."""

    def handler(args: argparse.Namespace, console: Console) -> int:
        from agentrun.cli import interrupts

        return interrupts.run(_connected(action, args, console), args)

    return handler


async def _connected(action: EngineAction, args: argparse.Namespace, console: Console) -> int:
    from agentrun.client.engine import connect
    from agentrun.worker import telemetry

    _say_notices()

    async with telemetry.running("agentrun-client", serves=False):
        return await action(await connect(), args, console)


def _say_notices() -> None:
    """What the API tells of its own progress ("waiting for a worker to take the answer…"), as plain
    lines on stderr; a program using the API routes the `agentrun.client` logger as it likes."""
    import logging

    notices = logging.getLogger("agentrun.client")
    if not notices.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        notices.addHandler(handler)
    notices.setLevel(logging.INFO)
    notices.propagate = False  # a worker in this process logs its own records to its log file


def command(sub: Any, name: str, help: str, handler: Handler, **kwargs: Any) -> argparse.ArgumentParser:
    """Add subcommand `name`, carried out by `handler`."""
    parser: argparse.ArgumentParser = sub.add_parser(name, help=help, **kwargs)
    parser.set_defaults(handler=handler)
    return parser
