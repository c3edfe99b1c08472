"""A graph's tool sources as cycgraph declares them on an agent or a node (a node's list standing in
for its agent's): `{type: builtin, name}` (cycgraph's `save_to_memory`, or one of the engine's
built-in tools), `{type: mcp, server_id, tool_names?}` (a declared MCP server, all its tools unless
named), `{type: custom, name}` (a host tool: the program or agentrun.yaml that runs the graph binds
the name, and `start` refuses a run whose names are not bound). A node of `max_steps` makes at most that many tool calls a prompt."""

from __future__ import annotations

import re
from typing import Any

from agentrun.lang import grants, ir
from agentrun.lang.dialects.builder import Builder
from agentrun.lang.tool_names import BUILTIN_TOOLS
from agentrun.lang.yamlpos import PosDict

SOURCE_KEYS = {"builtin": {"type", "name"}, "mcp": {"type", "server_id", "tool_names"}, "custom": {"type", "name"}}
HOST_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")  # as a chat API takes a tool's name
# cycgraph's other built-in tools, which need its graph-building host: refused by name.
ARCHITECT = ("architect_create_graph", "architect_update_graph", "architect_get_graph", "architect_list_graphs")
_HINT = "write {type: builtin, name: save_to_memory} or {type: mcp, server_id: files, tool_names: [read_file]}"


def grant_of(build: Builder, raw: Any, at: tuple, max_steps: Any = None) -> ir.ToolGrant | None:
    """The grant a `tools:` list makes; its problems, each at its item, go to `build`."""
    if raw is None:
        return None
    if not isinstance(raw, list):
        build.problem(at, "tools: must be a list of tool sources", _HINT)
        return None
    builtin: list[str] = []
    local: list[str] = []
    host: list[str] = []
    mcp: list[ir.McpGrant] = []
    for i, source in enumerate(raw):
        where = (*at, i)
        kind = source.get("type") if isinstance(source, PosDict) else None
        if kind not in SOURCE_KEYS:
            why = f"type '{kind}'" if kind else "no type"
            build.problem(where, f"a tool source with {why}", _HINT)
            continue
        assert isinstance(source, PosDict)
        build.unknown_keys(source, where, SOURCE_KEYS[kind], f" in a {kind} tool source")
        if kind == "mcp":
            server, names = source.get("server_id"), source.get("tool_names") or []
            if not isinstance(server, str) or not server:
                build.problem(where, "an mcp tool source needs a server_id:", _HINT)
            elif not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                build.problem((*where, "tool_names"), "tool_names: must be a list of the server's tool names", "")
            else:
                mcp.append(ir.McpGrant(server=server, tools=list(names)))
            continue
        name = str(source.get("name") or "")
        if kind == "custom":
            if HOST_NAME.fullmatch(name):
                host.append(name)
                build.warn((*where, "name"), *grants.host_note(name))
            else:
                build.problem((*where, "name"), "a custom tool source needs a name: letters, digits, _ or -", "")
            continue
        if name in grants.LOCAL:
            local.append(name)
        elif name in BUILTIN_TOOLS:
            builtin.append(name)
        elif name in ARCHITECT:
            build.problem(
                (*where, "name"), f"the tool '{name}' builds graphs in cycgraph's host; it is not run here", ""
            )
        else:
            build.problem((*where, "name"), *grants.unknown(name, grants.LOCAL))
    limit = max_steps if isinstance(max_steps, int) and not isinstance(max_steps, bool) and max_steps > 0 else None
    return grants.grant(builtin, mcp, local, limit, host)
