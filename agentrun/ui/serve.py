"""Serving the app with uvicorn in the command's own event loop, where its Temporal client lives."""

from __future__ import annotations

import contextlib
import sys
from typing import Any

import uvicorn
from rich.console import Console

from agentrun.client.engine import Engine
from agentrun.errors import UsageError
from agentrun.ui.app import build
from agentrun.ui.guard import allowed_hosts


class _Server(uvicorn.Server):
    """Says where it listens once it does; Ctrl-C is the command line's (client.interrupts), not uvicorn's."""

    def __init__(self, config: uvicorn.Config, console: Console) -> None:
        super().__init__(config)
        self.console = console

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        if self.started:
            scheme = "https" if self.config.ssl_certfile else "http"
            host = f"[{self.config.host}]" if ":" in self.config.host else self.config.host
            where = f"{scheme}://{host}:{self.config.port}/"
            self.console.print(f"inbox at {where} (Ctrl-C to stop)", markup=False)
            sys.stdout.flush()

    def capture_signals(self) -> Any:
        return contextlib.nullcontext()


async def serve(
    engine: Engine,
    host: str,
    port: int,
    token: str | None,
    console: Console,
    names: tuple[str, ...] = (),
    tls: tuple[str, str] | None = None,
) -> int:
    """Serve until interrupted, answering for the loopback names, `host` and `names`; over TLS with
    `tls` (certificate file, key file). UsageError when the address cannot be listened on."""
    hosts = allowed_hosts(port, (host, *names), tls=tls is not None)
    app = build(engine, token, hosts, tls=tls is not None)
    certfile, keyfile = tls or (None, None)
    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", ssl_certfile=certfile, ssl_keyfile=keyfile, server_header=False
    )
    server = _Server(config, console)
    try:
        await server.serve()
    except SystemExit:  # uvicorn's way of saying it could not bind; it logged why
        raise UsageError(f"cannot listen on {host}:{port}\n  hint: choose another with --port N") from None
    return 0
