"""The two MCP activities: list a server's tools, and call one of them. A refused call, a tool's
error, a timeout and a server that stays gone are results the model reads, not failed activities.
Whether a call may run is agentrun.policy's to decide (the server's declaration, the step's grant,
the run's `[mcp]` table).

The SDK loads at the first MCP call, not with the worker (it would add about 0.3 s to every start)."""

from __future__ import annotations

import asyncio
import functools
import sys
import time
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from agentrun.activities.beating import answered
from agentrun.activities.redact import redactor
from agentrun.models.mcp import CALL_ATTEMPTS, CALL_MCP_TOOL, LIST_MCP_TOOLS, McpCallInput, McpListInput, McpToolList
from agentrun.models.tools import ToolResult, ToolSpec
from agentrun.policy import Asked, decide


@activity.defn(name=LIST_MCP_TOOLS)
async def list_mcp_tools(input: McpListInput) -> McpToolList:
    from agentrun.activities.mcp import connections

    server = input.server
    conn = connections.connection(server)
    try:
        async with conn.slots:
            client = await conn.client()
            listed = await asyncio.wait_for(_all_tools(client), timeout=server.timeout_s)
    except Exception as exc:
        if connections.gone(exc):
            await conn.drop()
        raise ApplicationError(
            f"MCP server {server.id!r} could not list its tools: {connections.reason(exc)}", type="McpServerUnavailable"
        ) from None
    tools = [
        ToolSpec(name=t.name, description=t.description or "", parameters=dict(t.input_schema or {"type": "object"}))
        for t in listed
        if t.name not in server.denied_tools
    ]
    return McpToolList(server_id=server.id, tools=tools)


async def _all_tools(client: Any) -> list[Any]:
    tools, cursor = [], None
    while True:
        page = await client.list_tools(cursor=cursor) if cursor else await client.list_tools()
        tools.extend(page.tools)
        cursor = getattr(page, "next_cursor", None)
        if not cursor:
            return tools


@activity.defn(name=CALL_MCP_TOOL)
async def call_mcp_tool(input: McpCallInput) -> ToolResult:
    """Heartbeating while the server answers: a call whose worker dies runs again on another, and
    its result says so at its head."""
    return await answered(_call(input))


async def _call(input: McpCallInput) -> ToolResult:
    started = time.monotonic()
    server = input.server
    taint = f"mcp:{server.id}:{input.tool}"

    def result(ok: bool, content: str, error: str | None = None, refused: bool = False) -> ToolResult:
        cap = input.policy.limits.output_chars
        clean = redactor()
        return ToolResult(
            call_id=input.call_id,
            name=input.name,
            ok=ok,
            content=clean(content[:cap]),
            refused=refused,
            error=clean(error) if error else None,
            truncated=len(content) > cap,
            duration_s=time.monotonic() - started,
            taint_source="" if refused else taint,
        )

    asked = Asked(
        "mcp", f"{server.id}:{input.tool}", input.arguments, granted=input.granted, denied=server.denied_tools
    )
    decision = decide(input.policy, asked)
    if decision.refused:  # "ask": the workflow had a person approve it first
        return result(False, decision.reason, decision.reason, refused=True)
    if decision.warning:
        _warn_once(server.id, decision.warning)
    from agentrun.activities.mcp import connections

    conn = connections.connection(server)
    try:
        async with conn.slots:
            client = await conn.client()
            answer = await asyncio.wait_for(client.call_tool(input.tool, input.arguments), timeout=server.timeout_s)
    except TimeoutError:
        said = f"MCP tool {input.tool!r} of server {server.id!r} timed out after {server.timeout_s:g}s"
        return result(False, said, said)
    except Exception as exc:
        if not connections.gone(exc):
            said = f"MCP tool {input.tool!r} of server {server.id!r}: {connections.message(exc)}"
            return result(False, said, said)
        await conn.drop()
        said = f"MCP server {server.id!r} went away during the call ({connections.reason(exc)})"
        if activity.info().attempt < CALL_ATTEMPTS:
            raise ApplicationError(said + "; trying again on a server started anew", type="McpServerGone") from None
        return result(False, said, said)
    text = connections.text_of(answer.content)
    if answer.is_error:
        return result(False, text, text or "the tool failed and said nothing")
    return result(True, text)


@functools.cache
def _warn_once(server_id: str, warning: str) -> None:
    """Said once a worker for each server (the real system says it at every call)."""
    activity.logger.warning(f"MCP server {server_id!r}: {warning}")


async def close_connections() -> None:
    """Stop the MCP servers this worker started (its connections on this event loop); nothing to
    do, and no SDK loaded, when it made no MCP call."""
    found = sys.modules.get("agentrun.activities.mcp.connections")
    if found is not None:
        await found.close_all()
