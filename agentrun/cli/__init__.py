"""The command line: `python -m client …` and `agentrun …` (the same commands, plus `agentrun worker`
and `agentrun completion`).

One module per command group adds its commands: `specs` (validate, inspect, dry-run), `runs`
(start, fork, diff, watch, cancel, status, list, report, logs), `people` (pending, answer, approve,
reject, budget), `mcp_serve`, `ui` (the web page), `server` (what start left running), `upgrade` (checking runs against new code, builds), and `shell` for the `agentrun` command's own. Each command imports what
it needs when it runs, so `--help` and the spec commands start without Temporal's client or worker.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from rich.console import Console

from agentrun import __version__
from agentrun.cli import mcp_serve, people, runs, server, shell, specs, ui, upgrade
from agentrun.errors import UserError

EXIT_BROKEN_PIPE = 141  # as a program killed by SIGPIPE: `status --json | head` read what it wanted


def parser(prog: str = "python -m client") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Run durable multi-agent workflows.")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    runs.add_commands(sub)
    specs.add_commands(sub)
    people.add_commands(sub)
    mcp_serve.add_commands(sub)
    ui.add_commands(sub)
    server.add_commands(sub)
    upgrade.add_commands(sub)
    if prog == "agentrun":
        shell.add_commands(sub)
    return p


def run(args: argparse.Namespace) -> int:
    """Carry out a parsed command; the exit code."""
    console = Console(highlight=False, soft_wrap=True)
    try:
        return args.handler(args, console)
    except UserError as exc:
        print(exc.message(), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        from agentrun.cli import interrupts

        print(interrupts.farewell(args), file=sys.stderr)
        return interrupts.EXIT_INTERRUPTED


def client(argv: list[str] | None = None) -> int:
    """`python -m client ARGS`: the exit code."""
    return run(parser().parse_args(argv))


def agentrun(argv: list[str] | None = None) -> int:
    """`agentrun ARGS`: the exit code; also answers the shell's completion requests."""
    from agentrun import spelling

    spelling.called_as_agentrun()
    p = parser(prog="agentrun")
    shell.complete(p)
    return run(p.parse_args(argv))


def run_as(entry: str, argv: list[str]) -> int:
    """Command line `entry` ("agentrun", else `python -m client`'s) with `argv`: the exit code."""
    return agentrun(argv) if entry == "agentrun" else client(argv)


def exit_with(code_of: Callable[[], int]) -> None:
    """Run the CLI and leave without finalizing: the SDK's native threads can still be calling into
    Python while the interpreter finalizes, which aborts the process now and then."""
    os._exit(finish(code_of))


def finish(code_of: Callable[[], int]) -> int:
    """Run the CLI and flush what it printed; the exit code, as Python would give it for a
    `SystemExit` (argparse's usage errors) or a reader that went away."""
    try:
        try:
            code = code_of()
        except SystemExit as exc:
            code = _exit_code(exc)
        sys.stdout.flush()
    except BrokenPipeError:
        code = EXIT_BROKEN_PIPE
    try:
        sys.stderr.flush()
    except BrokenPipeError:
        pass
    return code


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None or isinstance(exc.code, int):
        return exc.code or 0
    print(exc.code, file=sys.stderr)
    return 1
