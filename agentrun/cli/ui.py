"""`ui`: the inbox and the runs as a web page (agentrun.ui).

Beyond loopback the page fails closed: it does not start without a token, and it answers only for
the names it is told (agentrun.ui.guard)."""

from __future__ import annotations

import argparse
import ipaddress
import os
import socket
from typing import TYPE_CHECKING, Any

from rich.console import Console

from agentrun.cli.args import command, on_temporal
from agentrun.errors import UsageError

if TYPE_CHECKING:
    from agentrun.client.engine import Engine

PORT = 8280
PORT_ENV = "AGENTRUN_INBOX_PORT"  # not Temporal Web's, which is AGENTRUN_TEMPORAL_UI_PORT
HOST = "127.0.0.1"
TOKEN_ENV = "AGENTRUN_UI_TOKEN"
MAKE_TOKEN = "python -c 'import secrets; print(secrets.token_urlsafe(24))'"
MIN_TOKEN = 16  # characters of a token guarding a page served beyond loopback: not one to guess


def add_commands(sub: Any) -> None:
    u = command(sub, "ui", "the inbox of open questions and the runs, as a web page", _before_connecting)
    port = int(os.environ.get(PORT_ENV) or PORT)
    u.add_argument("--port", type=int, default=port, help=f"the port to serve on (default {PORT}, or {PORT_ENV})")
    u.add_argument(
        "--host",
        default=HOST,
        help=f"the address to listen on (default {HOST}); any other needs a token in {TOKEN_ENV}",
    )
    u.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a name people reach the page by (a DNS name or address; repeat for more), besides "
        "127.0.0.1, localhost, [::1] and --host: requests naming any other get 421",
    )
    u.add_argument("--certfile", help="serve HTTPS with this certificate (PEM), for a page served to a network")
    u.add_argument("--keyfile", help="the certificate's private key (PEM), with --certfile")


def loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _unspecified(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def checked(args: argparse.Namespace, token: str | None) -> tuple[tuple[str, ...], tuple[str, str] | None]:
    """The names the page answers for besides loopback, and its TLS files; UsageError for a bind
    that would fail open."""
    host = args.host.strip()
    if not host:
        raise UsageError(
            "--host is empty, which would listen on every address of this machine\n"
            f"  hint: leave it out to serve {HOST} only, or name the address (and set {TOKEN_ENV})"
        )
    if not loopback(host) and not token:
        raise UsageError(
            f"listening on {host} lets whoever reaches it read your runs and answer their gates: "
            f"set a token first\n  hint: export {TOKEN_ENV}=$({MAKE_TOKEN})"
        )
    if not loopback(host) and token and len(token) < MIN_TOKEN:
        raise UsageError(
            f"{TOKEN_ENV} has {len(token)} characters: a page served on {host} needs a token of at least "
            f"{MIN_TOKEN}, which no one guesses\n  hint: export {TOKEN_ENV}=$({MAKE_TOKEN})"
        )
    if bool(args.certfile) != bool(args.keyfile):
        raise UsageError("--certfile and --keyfile go together\n  hint: give both, or neither for plain HTTP")
    for path in (args.certfile, args.keyfile):
        if path and not os.path.isfile(path):
            raise UsageError(f"no such file: {path}\n  hint: --certfile and --keyfile name PEM files")
    names = [*args.allowed_host]
    if _unspecified(host):  # every address: the machine's own name is one people will use
        names += [socket.gethostname(), socket.getfqdn()]
    elif not loopback(host):
        names.append(host)
    return tuple(dict.fromkeys(names)), (args.certfile, args.keyfile) if args.certfile else None


def _before_connecting(args: argparse.Namespace, console: Console) -> int:
    """A bind that would fail open is refused before Temporal is even asked for; what it works out
    (on every address, the machine's own names: a DNS lookup) is worked out once."""
    token = os.environ.get(TOKEN_ENV) or None
    names, tls = checked(args, token)

    async def ui(engine: Engine, args: argparse.Namespace, console: Console) -> int:
        from agentrun.ui.serve import serve

        return await serve(engine, args.host.strip(), args.port, token, console, names, tls)

    return on_temporal(ui)(args, console)
