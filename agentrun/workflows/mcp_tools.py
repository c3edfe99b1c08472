"""A run's MCP servers as the tool loop sees them: the tools a step is offered from each server it is
granted, and its calls of them. A server's tools are listed by one activity at their first use in
the run and kept (so the list is in history once, and a server that changes its tools mid-run does
not change what the run offers); each call is its own activity.

A call the workflow can refuse by itself (a server no one declared) is refused here, without an
activity, as the model's answer: the step goes on. So is a call of a server that could not list its
tools (it did not start, or died, at every attempt): the step is offered the tools its grant names
(one stand-in for a whole server), each described and answered by the server's error. `Mcp` is the
tool loop's source for them."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import TYPE_CHECKING

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, CancelledError

from agentrun.lang.mcp_servers import McpServer, tool_name
from agentrun.models.mcp import (
    CALL_ATTEMPTS,
    CALL_MCP_TOOL,
    CALL_SETTINGS,
    LIST_MCP_TOOLS,
    McpCallInput,
    McpListInput,
    McpToolList,
)
from agentrun.models.tools import ToolCall, ToolPolicy, ToolResult, ToolSpec
from agentrun.workflows import activity_calls

if TYPE_CHECKING:
    from agentrun.workflows.tool_loop import Route, Toolbox

# A server that went away is started again on the next attempt; the last one answers the model.
CALL_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=CALL_ATTEMPTS)
LIST_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=3)
START_S = 30.0  # room for a stdio server to start on top of its own timeout
TOOL_CRASHES = "tool-calls-heartbeat"  # as workflows.tool_loop's: calls run as models.mcp.CALL_SETTINGS say
# Runs recorded before this failed the step when a server could not list its tools.
UNLISTED_ANSWERS = "mcp-unlisted-answers"
STAND_IN = "unavailable"  # the tool offered for a whole server that could not list its own


class McpTools:
    def __init__(self, servers: dict[str, McpServer]):
        self.servers = servers
        # One listing per server per run, shared by steps that ask at the same time.
        self.listed: dict[str, asyncio.Task[McpToolList]] = {}

    async def offered(self, server_id: str, tool_names: list[str] | None = None) -> list[ToolSpec]:
        """The tools of one server a step is granted (all of them without `tool_names`), by the names
        the model is offered. An undeclared server offers nothing (validate says so first)."""
        server = self.servers.get(server_id)
        if server is None:
            return []
        listed = await self._listed(server)
        if listed.error:
            about = f"Not available in this run: {listed.error}. A call answers with this error."
            empty = {"type": "object", "properties": {}}
            return [
                ToolSpec(name=tool_name(server_id, t), description=about, parameters=empty)
                for t in tool_names or [STAND_IN]
            ]
        return [
            ToolSpec(name=tool_name(server_id, t.name), description=t.description, parameters=t.parameters)
            for t in listed.tools
            if not tool_names or t.name in tool_names
        ]

    async def call(
        self,
        server_id: str,
        call: ToolCall,
        policy: ToolPolicy,
        *,
        run_id: str = "",
        step: str = "",
        idempotency_key: str = "",
        granted: list[str] | None = None,
        summary: str = "",
    ) -> ToolResult:
        """One call of a server's tool (`call.name` is the server's own name for it), its own
        activity; refused without one when the server is not declared."""
        server = self.servers.get(server_id)
        if server is None:
            why = f"MCP server {server_id!r} is not declared for this run; no call was made"
            return ToolResult(call_id=call.id, name=call.name, ok=False, content=why, refused=True, error=why)
        listing = self.listed.get(server_id)
        if listing is not None and listing.done() and not listing.cancelled() and listing.result().error:
            said = listing.result().error
            return ToolResult(call_id=call.id, name=call.name, ok=False, content=f"error: {said}", error=said)
        arg = McpCallInput(
            server=server,
            tool=call.name,
            call_id=call.id,
            name=tool_name(server_id, call.name),
            arguments=call.arguments,
            policy=policy,
            run_id=run_id,
            step=step,
            idempotency_key=idempotency_key,
            granted=granted or [],
        )
        if workflow.patched(TOOL_CRASHES):
            return await activity_calls.call_tool(
                CALL_MCP_TOOL, arg, ToolResult, CALL_SETTINGS, limit_s=server.timeout_s, summary=summary or arg.name
            )
        return await workflow.execute_activity(
            CALL_MCP_TOOL,
            arg,
            result_type=ToolResult,
            start_to_close_timeout=timedelta(seconds=server.timeout_s + START_S),
            retry_policy=CALL_RETRY,
            summary=(summary or arg.name)[:200],
        )

    async def _listed(self, server: McpServer) -> McpToolList:
        found = self.listed.get(server.id)
        if found is None:
            found = self.listed[server.id] = asyncio.ensure_future(self._list(server))
        return await found

    async def _list(self, server: McpServer) -> McpToolList:
        try:
            return await workflow.execute_activity(
                LIST_MCP_TOOLS,
                McpListInput(server=server),
                result_type=McpToolList,
                start_to_close_timeout=timedelta(seconds=server.timeout_s + START_S),
                retry_policy=LIST_RETRY,
                summary=f"tools of MCP server {server.id}",
            )
        except ActivityError as exc:
            if isinstance(exc.cause, CancelledError) or not workflow.patched(UNLISTED_ANSWERS):
                raise
            return McpToolList(server_id=server.id, error=activity_calls.reason(exc))


class Mcp:
    """The tool loop's source for MCP servers' tools (workflows.tool_loop.SOURCES["mcp"]): a step is
    offered the tools of each server its grant names, by `mcp_<server>_<tool>`."""

    async def offer(self, box: Toolbox) -> list[tuple[ToolSpec, Route]]:
        from agentrun.workflows.tool_loop import Route

        offered = []
        for grant in box.grant.mcp:
            for spec in await box.conv.mcp.offered(grant.server, grant.tools):
                offered.append((spec, Route("mcp", f"{grant.server}:{spec.name.removeprefix(f'mcp_{grant.server}_')}")))
        return offered

    async def call(self, box: Toolbox, route: Route, call: ToolCall) -> ToolResult:
        server_id, _, tool = route.target.partition(":")
        granted = next((g.tools for g in box.grant.mcp if g.server == server_id), [])
        n = box.conv.tool_calls_made.get(box.key, 0)
        named = call.model_copy(update={"name": tool})
        try:
            return await box.conv.mcp.call(
                server_id,
                named,
                box.policy,
                run_id=box.conv.state.run_id,
                step=box.key,
                idempotency_key=box.idempotency_key(n),
                granted=granted,
                summary=box.summary(call.model_copy(update={"name": tool_name(server_id, tool)})),
            )
        except ActivityError as exc:
            if workflow.patched(TOOL_CRASHES):
                raise activity_calls.not_completed(box.key, n, call, exc, CALL_SETTINGS) from None
            said = f"the MCP tool could not be called: {activity_calls.reason(exc)}"
            return ToolResult(call_id=call.id, name=call.name, ok=False, content=said, error=said)
