"""Connecting to Temporal the way the Temporal CLI does, or to the embedded dev server."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import time

from temporalio.client import Client
from temporalio.envconfig import ClientConfig

from agentrun import caller
from agentrun.errors import Unavailable
from agentrun.worker import blobs, embedded, telemetry

# How long a program already listening on the embedded server's port has to answer as Temporal does.
ADOPT_S = 5.0


class Unreachable(Unavailable):
    """Temporal could not be reached (exit code 3)."""


def settings() -> dict:
    """Connection settings from TEMPORAL_* variables and env-config profiles."""
    return dict(ClientConfig.load_client_connect_config(profile=os.environ.get("TEMPORAL_PROFILE")))


async def connect(target: str | None = None, namespace: str | None = None) -> Client:
    """`target` (HOST:PORT) and `namespace` over what the TEMPORAL_* variables say. Raises
    Unreachable, and BadBlobSetting before any connection is tried."""
    converter = blobs.data_converter()
    config = settings()
    if target:
        config["target_host"] = target
    if namespace:
        config["namespace"] = namespace
    # pid@host as Temporal names a process, with the pid of the command the user started, which is
    # not ours when the fork server runs it
    config["identity"] = config.get("identity") or f"{caller.caller_pid()}@{socket.gethostname()}"
    patience_s = 0.0
    if "target_host" not in config:
        try:
            ours = embedded.ensure_running()
        except RuntimeError as exc:
            raise Unreachable(str(exc)) from None
        config["target_host"] = embedded.address()
        if not ours:
            return await _adopt(config, converter)
        patience_s = 30.0  # a dev server that has just started listens before its frontend is healthy
    deadline = time.monotonic() + patience_s
    while True:
        try:
            return await Client.connect(**config, data_converter=converter, **telemetry.connect_options())
        except ValueError as exc:  # an address that is no address: waiting will not mend it
            raise Unreachable(
                f"TEMPORAL_ADDRESS {config['target_host']!r} is not an address ({exc})\n"
                "  hint: write HOST:PORT, e.g. 127.0.0.1:7233, or unset it to use the embedded dev server"
            ) from None
        except RuntimeError as exc:
            if time.monotonic() >= deadline:
                raise Unreachable(
                    f"cannot reach Temporal at {config['target_host']}: {exc}\n"
                    "  hint: check TEMPORAL_ADDRESS, or unset it to use the embedded dev server"
                ) from None
            await asyncio.sleep(0.25)


async def _adopt(config: dict, converter) -> Client:
    """The embedded server's port is taken by a program agentrun did not start: a Temporal server is
    used, and said so; anything else fails at once, naming what listens and the variable that moves
    the embedded server."""
    where = config["target_host"]
    who = embedded.listener(embedded.server_port())
    try:
        options = telemetry.connect_options()
        client = await asyncio.wait_for(Client.connect(**config, data_converter=converter, **options), ADOPT_S)
    except (RuntimeError, TimeoutError):
        raise Unreachable(
            f"{where} is taken by {who or 'a program'} that is not a Temporal server\n"
            "  hint: stop it, or set AGENTRUN_SERVER_PORT to a free port for the embedded server"
            " (or TEMPORAL_ADDRESS to reach a Temporal server elsewhere)"
        ) from None
    print(
        f"using the Temporal server already listening on {where}{f', {who}' if who else ''}, not one agentrun"
        " started; AGENTRUN_SERVER_PORT moves agentrun's own",
        file=sys.stderr,
    )
    return client


def web_url(client: Client, run_id: str) -> str | None:
    """The Temporal Web page of a run, when we know where the UI is."""
    base = os.environ.get("TEMPORAL_UI_URL")
    if not base and client.service_client.config.target_host == embedded.address():
        base = f"http://localhost:{embedded.ui_port()}"
    if not base:
        return None
    return f"{base.rstrip('/')}/namespaces/{client.namespace}/workflows/{run_id}"
