"""The tools a spec grants, in a coding agent's own words: Claude Code's permission rules for its
`--allowedTools` (Read, Bash, … and `mcp__<server>__<tool>`), which the agentapi driver passes on
when it starts the agent itself (refresh mode). Other coding agents take no such list."""

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
