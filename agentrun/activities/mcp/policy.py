"""Whether a call of a server's tool may run: the server is declared, the tool is not one its
declaration denies, the step was granted it, and the run's `[mcp]` table allows it (with
`default_deny`, only the `server:tool` patterns of `allowed_tools` run; `server:*` and `*:tool`
match any tool or any server, as the Agentfile's real system reads them)."""

from __future__ import annotations

from fnmatch import fnmatchcase

from agentrun.lang.mcp_servers import McpServer
from agentrun.models.tools import McpPolicy


def refusal(
    server: McpServer | None, server_id: str, tool: str, policy: McpPolicy | None, granted: list[str]
) -> str | None:
    """Why the call is refused, said for the model to read; None when it may run."""
    if server is None:
        return f"MCP server {server_id!r} is not declared for this run; no call was made"
    if tool in server.denied_tools:
        return f"tool {tool!r} of MCP server {server_id!r} is denied by the server's declaration"
    if granted and tool not in granted:
        return f"tool {tool!r} of MCP server {server_id!r} is not granted to this step (granted: {', '.join(granted)})"
    if policy is not None and policy.default_deny and not allowed(policy, server_id, tool):
        return f"policy denied: MCP tool '{server_id}:{tool}' is not in [mcp] allowed_tools (default_deny is on)"
    return None


def allowed(policy: McpPolicy, server_id: str, tool: str) -> bool:
    return any(fnmatchcase(f"{server_id}:{tool}", pattern) for pattern in policy.allowed_tools)
