"""The tools a spec grants, in a coding agent's own words: Claude Code's permission rules for its
`--allowedTools` (Read, Bash, … and `mcp__<server>__<tool>`), which the agentapi driver passes on
when it starts the agent itself (refresh mode). Other coding agents take no such list.

The pipeline language names tools as Claude Code does, so an MCP server's tools are granted there
by the same names: `mcp__<server>__<tool>`, or `mcp__<server>` for all of them."""

from __future__ import annotations

from agentrun.lang import ir
from agentrun.lang.tool_names import PIPELINE_NAMES

CLAUDE_CODE = {builtin: claude for claude, builtin in PIPELINE_NAMES.items()}


def claude_code(grant: ir.ToolGrant | None) -> list[str]:
    """Claude Code's names for the granted tools; an MCP server granted whole is `mcp__<server>`."""
    if grant is None:
        return []
    names = [CLAUDE_CODE[name] for name in grant.builtin if name in CLAUDE_CODE]
    for mcp in grant.mcp:
        names += [f"mcp__{mcp.server}__{tool}" for tool in mcp.tools] or [f"mcp__{mcp.server}"]
    return names


def mcp_grants(names: list[str]) -> list[ir.McpGrant]:
    """The MCP grants among Claude Code tool names, one per server (a whole server wins over its
    tools); other names are left out."""
    tools: dict[str, list[str]] = {}
    for name in names:
        found = mcp_name(name)
        if found is not None:
            server, tool = found
            granted = tools.setdefault(server, [])
            if not tool or granted == [""]:
                tools[server] = [""]
            elif tool not in granted:
                granted.append(tool)
    return [ir.McpGrant(server=server, tools=[t for t in named if t]) for server, named in tools.items()]


def mcp_name(name: str) -> tuple[str, str] | None:
    """(server, tool) of `mcp__<server>__<tool>`, (server, "") of `mcp__<server>`; else None."""
    if not name.startswith("mcp__"):
        return None
    server, _, tool = name.removeprefix("mcp__").partition("__")
    return (server, tool) if server else None


HOST_PREFIX = "host:"  # a pipeline's name for a host tool: `host:fetch_market_data`


def host_name(name: str) -> str | None:
    """The host tool `host:<name>` names; else None."""
    found = name.removeprefix(HOST_PREFIX) if name.startswith(HOST_PREFIX) else ""
    return found or None
