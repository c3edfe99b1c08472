"""The MCP servers of an Agentfile's `agent.toml` (its real system's configuration file, read here
from beside the Agentfile): `[mcp.servers.NAME]` tables with `command`, `args`, `env` and
`denied_tools`. The real system offers every goal the tools of every server it connects."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable

from agentrun.lang.errors import SpecError
from agentrun.lang.mcp_servers import McpServer, read_servers
from agentrun.lang.source import note

CONFIG_FILE = "agent.toml"
Problem = Callable[[int, int, str, str], None]


def mcp_servers(folder: str, problem: Problem) -> dict[str, McpServer]:
    """The servers `agent.toml` beside the Agentfile declares; none without one. A file that is not
    TOML or a bad table is a problem of the Agentfile's (said with the file's name)."""
    path = os.path.join(folder, CONFIG_FILE)
    if not os.path.exists(path):
        return {}
    note(path)
    try:
        with open(path, "rb") as f:
            tables = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        problem(1, 1, f"{CONFIG_FILE} beside it cannot be read: {exc}", f"fix the TOML, or move {CONFIG_FILE} away")
        return {}
    mcp = tables.get("mcp")
    servers = mcp.get("servers") if isinstance(mcp, dict) else None
    try:
        return read_servers(servers, path)
    except SpecError as exc:
        for found in exc.problems:
            problem(1, 1, f"{CONFIG_FILE}: {found.message}", '[mcp.servers.files]\ncommand = "npx"')
        return {}
