"""The environment a stdio MCP server starts with: what its declaration names, and of the worker's
own only PATH, HOME and LANG. The worker's keys and tokens never reach a server it was not told to
hand them to."""

from __future__ import annotations

import os
from collections.abc import Mapping

from agentrun.lang.mcp_servers import FROM_WORKER, McpServer

KEPT = ("PATH", "HOME", "LANG")


def server_environment(server: McpServer, worker: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables the server's process gets. A declared `${NAME}` is the worker's NAME, or left
    out when the worker has none."""
    worker = os.environ if worker is None else worker
    env = {name: worker[name] for name in KEPT if name in worker}
    for name, value in server.env.items():
        passed = FROM_WORKER.match(value)
        if passed is None:
            env[name] = value
        elif passed.group(1) in worker:
            env[name] = worker[passed.group(1)]
    return env
