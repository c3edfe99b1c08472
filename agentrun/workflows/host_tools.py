"""Host tools as the tool loop sees them (workflows.tool_loop.SOURCES["host"]): a step is offered the
host tools its grant names, each described once a run by a worker that has it (an activity on the
tool's own queue, which waits, pending, while no such worker runs), and each call an activity on
that queue, heartbeating and run again after a crash as the tool's settings say.

The run's policy decides here, before the call is scheduled: a host tool's table in policy.toml
(`[fetch_market_data] enabled = false`, or `ask`) applies to it as a built-in's does."""

from __future__ import annotations

import asyncio
import weakref
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from agentrun.models.builtin_tools import ToolSettings
from agentrun.models.host_tools import (
    CALL_HOST_TOOL,
    DESCRIBE_HOST_TOOL,
    RUN_HOST_COMMAND,
    HostBinding,
    HostCallInput,
    HostCommandInput,
    HostToolInfo,
    queue_of,
)
from agentrun.models.mcp import CALL_SETTINGS
from agentrun.models.tools import ToolCall, ToolResult, ToolSpec
from agentrun.policy import Asked, decide
from agentrun.policy.schemas import mismatch
from agentrun.workflows import activity_calls
from agentrun.workflows.failures import TaskFailed

if TYPE_CHECKING:
    from agentrun.workflows.tool_loop import Route, Toolbox

HOST_TOOLS = "host-tools"  # the patch under which a step is offered the host tools its grant names
DESCRIBE_S = 30.0  # one describe attempt, once a worker took it; the wait for a worker is unbounded
# A command may have partly run: attempted again once after a crash, as bash is; its own limit
# bounds each attempt.
COMMAND_SETTINGS = ToolSettings(adds_limit=True, attempts=2)
WAIT_S = 5.0  # a tool not described by then: the run says what it waits for
BIND = "start a worker with it: engine.worker(tools=[...]) in Python, or bind it in agentrun.yaml's host_tools:"

# Each run's descriptions, by tool name: described once, shared by steps that ask at the same time.
_described: weakref.WeakKeyDictionary[Any, dict[str, asyncio.Task[HostToolInfo]]] = weakref.WeakKeyDictionary()


class Host:
    async def offer(self, box: Toolbox) -> list[tuple[ToolSpec, Route]]:
        from agentrun.workflows.tool_loop import Route

        if not box.grant.host or not workflow.patched(HOST_TOOLS):
            return []
        offered = []
        for name in box.grant.host:
            info = await _bound(box, name)
            declared = box.conv.inp.plan.host_tools.get(name) or {}
            wrong = mismatch(declared, info.spec.parameters)
            if wrong:
                raise TaskFailed(
                    box.key, f"host tool {name!r} does not take what the spec declares: {wrong}", retryable=False
                )
            offered.append((info.spec, Route("host", name)))
        return offered

    async def call(self, box: Toolbox, route: Route, call: ToolCall) -> ToolResult:
        decision = decide(box.policy, Asked("host", route.target, call.arguments, workdir=box.workdir))
        if decision.refused:  # "ask": the tool loop had a person approve it first
            said = decision.reason
            return ToolResult(
                call_id=call.id, name=call.name, ok=False, refused=True, content=f"refused: {said}", error=said
            )
        binding = box.conv.inp.host_bindings.get(route.target)
        if binding is not None and binding.mcp:
            return await _mcp_call(box, route.target, binding, call)
        if binding is not None:
            return await _command_call(box, binding, call)
        info = await _info(route.target)
        n = box.conv.tool_calls_made.get(box.key, 0)
        arg = HostCallInput(
            call=call,
            run_id=box.conv.state.run_id,
            step=box.key,
            idempotency_key=box.idempotency_key(n),
            output_chars=box.policy.limits.output_chars,
        )
        try:
            return await activity_calls.call_tool(
                CALL_HOST_TOOL,
                arg,
                ToolResult,
                info.settings,
                limit_s=0.0,
                summary=box.summary(call),
                task_queue=queue_of(route.target),
            )
        except ActivityError as exc:
            raise activity_calls.not_completed(box.key, n, call, exc, info.settings) from None


async def _bound(box: Toolbox, name: str) -> HostToolInfo:
    """What agentrun.yaml binds the name to (an MCP server's tool, described by its listing, or a
    command, by its binding), else what the worker that has the function says."""
    binding = box.conv.inp.host_bindings.get(name)
    if binding is None:
        return await _waited(box, name)
    if not binding.mcp:
        return HostToolInfo(spec=binding.spec(name), settings=COMMAND_SETTINGS)
    listed = await box.conv.mcp.offered(binding.server, [binding.tool])
    spec = listed[0] if listed else binding.spec(name)
    return HostToolInfo(spec=spec.model_copy(update={"name": name}), settings=CALL_SETTINGS)


async def _mcp_call(box: Toolbox, name: str, binding: HostBinding, call: ToolCall) -> ToolResult:
    """The MCP server's tool, called as the step's MCP calls are (its server's policy applies too)."""
    n = box.conv.tool_calls_made.get(box.key, 0)
    named = call.model_copy(update={"name": binding.tool})
    try:
        result = await box.conv.mcp.call(
            binding.server,
            named,
            box.policy,
            run_id=box.conv.state.run_id,
            step=box.key,
            idempotency_key=box.idempotency_key(n),
            granted=[binding.tool],
            summary=box.summary(call),
        )
    except ActivityError as exc:
        raise activity_calls.not_completed(box.key, n, call, exc, CALL_SETTINGS) from None
    return result.model_copy(update={"name": name})


async def _command_call(box: Toolbox, binding: HostBinding, call: ToolCall) -> ToolResult:
    n = box.conv.tool_calls_made.get(box.key, 0)
    arg = HostCommandInput(
        call=call, binding=binding, workdir=box.workdir, policy=box.policy, idempotency_key=box.idempotency_key(n)
    )
    try:
        return await activity_calls.call_tool(
            RUN_HOST_COMMAND, arg, ToolResult, COMMAND_SETTINGS, limit_s=binding.timeout_s, summary=box.summary(call)
        )
    except ActivityError as exc:
        raise activity_calls.not_completed(box.key, n, call, exc, COMMAND_SETTINGS) from None


async def _waited(box: Toolbox, name: str) -> HostToolInfo:
    """The tool's description; a run whose tool no worker takes within WAIT_S says so in its state
    (`status`, `logs`) and goes on waiting."""
    described = _info(name)
    try:
        return await asyncio.wait_for(asyncio.shield(described), WAIT_S)
    except TimeoutError:
        box.conv.state.warn(f"{box.key}: {waiting_for(name)}; {BIND}")
        return await described


def waiting_for(name: str) -> str:
    return f"waiting for a worker that has host tool {name}"


def _info(name: str) -> asyncio.Task[HostToolInfo]:
    found = _described.setdefault(workflow.instance(), {})
    if name not in found:
        found[name] = asyncio.ensure_future(_describe(name))
    return found[name]


async def _describe(name: str) -> HostToolInfo:
    return await workflow.execute_activity(
        DESCRIBE_HOST_TOOL,
        result_type=HostToolInfo,
        task_queue=queue_of(name),
        start_to_close_timeout=timedelta(seconds=DESCRIBE_S),
        retry_policy=RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30)),
        summary=waiting_for(name),
        activity_id=waiting_for(name),  # what Temporal Web's pending-activity card shows
    )
