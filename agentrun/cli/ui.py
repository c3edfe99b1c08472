"""`ui`: the inbox and the runs as a web page (agentrun.ui)."""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
from typing import TYPE_CHECKING, Any

from rich.console import Console

from agentrun.cli.args import command, on_temporal

if TYPE_CHECKING:
    from agentrun.client.engine import Engine

PORT = 8280
HOST = "127.0.0.1"
TOKEN_ENV = "AGENTRUN_UI_TOKEN"


def add_commands(sub: Any) -> None:
    u = command(sub, "ui", "the inbox of open questions and the runs, as a web page", on_temporal(_ui))
    u.add_argument("--port", type=int, default=PORT, help=f"the port to serve on (default {PORT})")
    u.add_argument(
        "--host", default=HOST, help=f"the address to listen on (default {HOST}; set {TOKEN_ENV} before any other)"
    )


def loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def _ui(engine: Engine, args: argparse.Namespace, console: Console) -> int:
    from agentrun.ui.serve import serve

    token = os.environ.get(TOKEN_ENV) or None
    if not loopback(args.host):
        guard = f"the token in {TOKEN_ENV}" if token else f"nothing: set {TOKEN_ENV} to require a token"
        print(
            f"warning: listening on {args.host}: whoever reaches it can answer your runs' gates; guarded by {guard}",
            file=sys.stderr,
        )
    return await serve(engine.temporal, args.host, args.port, token, console)
