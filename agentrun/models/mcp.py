"""What crosses the wire for MCP tool sources: listing a server's tools (once per server per run, the
list kept in history) and calling one of them (each call its own activity, answered with the same
ToolResult a built-in tool gives)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from agentrun.lang.mcp_servers import McpServer
from agentrun.models.builtin_tools import ToolSettings
from agentrun.models.tools import ToolPolicy, ToolSpec

LIST_MCP_TOOLS = "list_mcp_tools"
CALL_MCP_TOOL = "call_mcp_tool"
# Attempts of a call whose server went away (each on a server started anew); after the last one the
# model reads that the server is gone, and the step goes on.
CALL_ATTEMPTS = 3
# How a call of an MCP server's tool runs: its server's timeout and room to start a stdio server, each
# attempt heartbeating so a call whose worker dies runs again on another worker within seconds.
CALL_SETTINGS = ToolSettings(timeout_s=30.0, adds_limit=True, attempts=CALL_ATTEMPTS, backoff_s=0.2)


class McpListInput(BaseModel):
    server: McpServer


class McpToolList(BaseModel):
    """A server's tools as it listed them (their own names, not yet the names a model is offered)."""

    server_id: str
    tools: list[ToolSpec] = []
    # Why the server could not list them (it did not start, or died, at every attempt): the step is
    # offered its granted tools all the same, and each call answers this.
    error: str = ""


class McpCallInput(BaseModel):
    """One call of one server's tool, as the workflow hands it to the call_mcp_tool activity."""

    server: McpServer
    tool: str  # the server's own name for it
    call_id: str  # the model's id for the call
    name: str  # the name the model called it by (mcp_<server>_<tool>)
    arguments: dict[str, Any] = {}
    policy: ToolPolicy = Field(default_factory=ToolPolicy)  # its `[mcp]` table and output cap apply
    run_id: str = ""
    step: str = ""
    idempotency_key: str = ""
    granted: list[str] = Field(default_factory=list)  # the tools of this server the step may call; [] all
