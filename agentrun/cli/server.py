"""`server status` and `server stop`: what `start` left running in the background on this machine,
the embedded Temporal dev server and this install's fork servers, and a way to stop them that
leaves every other install's fork servers alone."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from agentrun.cli.args import EXIT_OK, command

EXIT_NOT_STOPPED = 1


def add_commands(sub: Any) -> None:
    s = command(sub, "server", "show or stop the embedded Temporal server and this install's fork servers", _status)
    which = s.add_subparsers(dest="action", metavar="ACTION")
    command(which, "status", "what runs in the background for this install", _status)
    command(which, "stop", "stop the embedded Temporal server and this install's fork servers", _stop)


def _status(args: argparse.Namespace, console: Console) -> int:
    from agentrun import forkservers
    from agentrun.worker import embedded

    pid = embedded.running_pid()
    if pid:
        say(
            console,
            f"embedded Temporal server: running, pid {pid}, {embedded.address()}, "
            f"Web UI http://localhost:{embedded.ui_port()}, database {embedded.state_dir() / 'temporal.db'}",
        )
    else:
        say(console, f"embedded Temporal server: not running (none started from {embedded.state_dir()})")
    servers = forkservers.this_installs_servers()
    for server in servers:
        say(console, f"fork server: running, pid {server.pid}, for {server.python}")
    if not servers:
        say(console, "fork server: none running for this install")
    return EXIT_OK


def _stop(args: argparse.Namespace, console: Console) -> int:
    from agentrun import forkservers
    from agentrun.worker import embedded

    code = EXIT_OK
    pid = embedded.running_pid()
    if pid is None:
        say(console, "embedded Temporal server: not running")
    elif embedded.stop(pid):
        say(console, f"embedded Temporal server: stopped (pid {pid}); its runs wait in its database for the next start")
    else:
        say(console, f"embedded Temporal server: pid {pid} did not stop; see {embedded.state_dir() / 'temporal.log'}")
        code = EXIT_NOT_STOPPED
    servers = forkservers.this_installs_servers()
    for server in servers:
        if forkservers.stop(server):
            say(console, f"fork server: stopped (pid {server.pid}, for {server.python})")
        else:
            say(console, f"fork server: pid {server.pid} did not stop; see {server.socket.with_suffix('.log')}")
            code = EXIT_NOT_STOPPED
    if not servers:
        say(console, "fork server: none running for this install")
    return code


def say(console: Console, line: str) -> None:
    console.print(line, markup=False, highlight=False)
