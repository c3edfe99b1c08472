"""The tools one task's agent is offered, and each call it makes answered by where the tool lives.

A tool's calls go by its source, through one table (SOURCES): `builtin` (the run_tool activity,
under the run's policy), `mcp` (an MCP server's tool, an activity of its own) and `local` (answered
by the workflow itself, like cycgraph's save_to_memory). Each call that touches the world is an
activity of its own, so a worker killed between calls resumes with the finished ones recorded in
history and runs none of them again. Calls of one reply are answered in order, one after another:
a model that writes a file and then runs it asks for both in one reply.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from temporalio import workflow
from temporalio.exceptions import ActivityError, CancelledError

from agentrun.lang import ir
from agentrun.models import calls
from agentrun.models.builtin_tools import BUILTINS
from agentrun.models.contract import ARGUMENTS_SHOWN, ToolUse
from agentrun.models.tool_policy import from_tables
from agentrun.models.tools import RUN_TOOL, ToolCall, ToolCallInput, ToolPolicy, ToolResult, ToolSpec, builtin_specs
from agentrun.workflows import activity_calls, approvals, mcp_tools, tracing
from agentrun.workflows.failures import CallNotCompleted, TaskFailed
from agentrun.workflows.local_tools import Local
from agentrun.workflows.mcp_tools import Mcp
from agentrun.workflows.scope import Scope
from agentrun.workflows.taint import fence

if TYPE_CHECKING:
    from agentrun.workflows.conversation import Conversation

TOOL_LOOP = "tool-loop"  # the patch under which a granted agent is offered its tools
# The patch under which a tool call heartbeats and runs again after a crash as its declaration says,
# and one that could not be completed fails the step.
TOOL_CRASHES = mcp_tools.TOOL_CRASHES
REASON_SHOWN = 300  # characters of an error or refusal the run state keeps


@dataclass(frozen=True)
class Route:
    """Where one offered tool's calls go: its source and what that source calls (the built-in's
    name, `server:tool` for an MCP server's, the local tool's name)."""

    source: str
    target: str


class Source(Protocol):
    """A place tools live: what it offers a task's agent, and how it answers one call."""

    async def offer(self, box: Toolbox) -> list[tuple[ToolSpec, Route]]: ...

    async def call(self, box: Toolbox, route: Route, call: ToolCall) -> ToolResult: ...


class Toolbox:
    """One task's tools for one prompt: offered once, then each call routed, recorded and counted."""

    def __init__(self, conv: Conversation, node: ir.Task, scope: Scope, grant: ir.ToolGrant):
        self.conv, self.node, self.scope, self.grant = conv, node, scope, grant
        self.key = str(scope.key)
        self.routes: dict[str, Route] = {}
        self.words = ""  # what the model said with the calls it asks for now (a person approving one reads it)

    @property
    def policy(self) -> ToolPolicy:
        return self.conv.tool_policy

    @property
    def workdir(self) -> str:
        return self.conv.inp.workdir

    async def offer(self) -> list[ToolSpec]:
        """The tools the grant names, each source's in the order of SOURCES; a name offered twice
        goes to the first source that offers it."""
        specs: list[ToolSpec] = []
        for source in SOURCES.values():
            for spec, route in await source.offer(self):
                if spec.name not in self.routes:
                    self.routes[spec.name] = route
                    specs.append(spec)
        return specs

    async def answer(self, asked: list[calls.ToolCall], words: str = "") -> list[calls.ChatMessage]:
        """Each call answered in order, as the tool turns a chat API takes next; past the step's
        max_tool_calls the step fails saying so. `words`: what the model said with the calls."""
        self.words = words
        done: list[calls.ChatMessage] = []
        for call in asked:
            made = self.conv.tool_calls_made.get(self.key, 0) + 1
            self.conv.tool_calls_made[self.key] = made
            if made > self.grant.max_calls:
                raise TaskFailed(
                    self.key,
                    f"the agent asked for more than {self.grant.max_calls} tool calls (max_tool_calls); "
                    f"the last one was {call.name}",
                    retryable=False,
                )
            result = await self._one(call)
            content = result.content or _said(result)
            fenced = fence(content) if self.conv.inp.plan.security == "paranoid" else content
            done.append(calls.ChatMessage(role="tool", content=fenced, tool_call_id=call.id))
            self.conv.threads.kept_at(done[-1], result)
        return done

    async def _one(self, asked: calls.ToolCall) -> ToolResult:
        route = self.routes.get(asked.name)
        began = workflow.now()
        use = ToolUse(
            call_id=asked.id,
            tool=asked.name,
            arguments=asked.arguments[:ARGUMENTS_SHOWN],
            at=began,
            source=route.source if route else "builtin",
        )
        self.conv.state.record_tool_call(self.key, use)
        with tracing.tool_call(self.key, asked.name, asked.id, use.source) as ended:
            try:
                result = await self._run(asked, route)
            except CallNotCompleted as exc:
                took = round((workflow.now() - began).total_seconds(), 3)
                use.end("lost", exc.message[:REASON_SHOWN], took, exc.attempts)
                ended(use.outcome, use.reason)
                raise
            use.end(
                "ok" if result.ok else "refused" if result.refused else "error",
                (result.error or "")[:REASON_SHOWN],
                round((workflow.now() - began).total_seconds(), 3),
                result.attempt,
            )
            ended(use.outcome, use.reason)
        return result

    async def _run(self, asked: calls.ToolCall, route: Route | None) -> ToolResult:
        """The call's result, or a result saying why it was not made: a tool the agent was not
        offered, arguments that are not a JSON object."""
        if route is None:
            offered = ", ".join(self.routes) or "none"
            return _refused(asked, f"there is no tool '{asked.name}' here; the tools offered: {offered}")
        try:
            arguments = json.loads(asked.arguments or "{}")
        except ValueError as exc:
            return _failed(asked, f"the arguments are not JSON: {exc}")
        if not isinstance(arguments, dict):
            return _failed(asked, "the arguments must be a JSON object")
        call = ToolCall(id=asked.id, name=route.target, arguments=arguments)
        # The policy's `ask`: a person approves the call before it is scheduled, or it is not made.
        refusal = await approvals.ask(self, route, call)
        if refusal is not None:
            return _refused(asked, refusal)
        return await SOURCES[route.source].call(self, route, call)

    def summary(self, call: ToolCall) -> str:
        """What Temporal Web names the call's activity by: the step, the tool and its arguments."""
        shown = json.dumps(call.arguments, ensure_ascii=False)
        return f"{self.node.label}: {call.name} {shown}"[:200]

    def idempotency_key(self, n: int) -> str:
        """The same for every attempt of the step's n-th call, different for any other call."""
        return f"{self.conv.state.run_id}/{self.key}/tool-{n}"


def _said(result: ToolResult) -> str:
    """What the model reads of a result that came back without content: how it ended, as run_tool says it."""
    if result.ok:
        return ""
    return ("refused: " if result.refused else "error: ") + (result.error or "")


def _refused(asked: calls.ToolCall, reason: str) -> ToolResult:
    return ToolResult(
        call_id=asked.id, name=asked.name, ok=False, refused=True, content=f"refused: {reason}", error=reason
    )


def _failed(asked: calls.ToolCall | ToolCall, reason: str) -> ToolResult:
    return ToolResult(call_id=asked.id, name=asked.name, ok=False, content=f"error: {reason}", error=reason)


class Builtin:
    """The built-in tools: each call the run_tool activity, under the run's policy, in its work
    directory, carrying the step's idempotency key."""

    async def offer(self, box: Toolbox) -> list[tuple[ToolSpec, Route]]:
        return [(spec, Route("builtin", spec.name)) for spec in builtin_specs(box.grant.builtin)]

    async def call(self, box: Toolbox, route: Route, call: ToolCall) -> ToolResult:
        n = box.conv.tool_calls_made.get(box.key, 0)
        arg = ToolCallInput(
            call=call,
            workdir=box.workdir,
            policy=box.policy,
            run_id=box.conv.state.run_id,
            step=box.key,
            idempotency_key=box.idempotency_key(n),
            keep=box.conv.threads.keeps(),
        )
        rule = box.policy.rule(call.name)
        limit_s = rule.timeout_s or box.policy.limits.bash_timeout_s
        declared = BUILTINS.get(call.name)
        if declared is not None and workflow.patched(TOOL_CRASHES):
            settings = declared.settings
            try:
                return await activity_calls.call_tool(
                    RUN_TOOL, arg, ToolResult, settings, limit_s=limit_s, summary=box.summary(call)
                )
            except ActivityError as exc:
                raise activity_calls.not_completed(box.key, n, call, exc, settings) from None
        # Before TOOL_CRASHES: no heartbeat, and a call that could not be run was an error the model read.
        try:
            return await activity_calls.call(
                RUN_TOOL, arg, ToolResult, summary=box.summary(call), timeout_s=limit_s + 60.0
            )
        except ActivityError as exc:
            if isinstance(exc.cause, CancelledError):
                raise asyncio.CancelledError() from None  # the run or this branch was cancelled
            return _failed(call, f"the tool could not be run: {activity_calls.reason(exc)}")


# Where each source's calls go. A new source is one more entry.
SOURCES: dict[str, Source] = {"builtin": Builtin(), "mcp": Mcp(), "local": Local()}


def policy_of(plan: ir.Plan, steering_files: list[str] | None = None) -> ToolPolicy:
    """The run's policy: the policy.toml its spec named (or found beside it), else the defaults;
    with the files of the work directory the run was made from, which no tool may change."""
    policy = from_tables(plan.tool_policy, plan.policy_file)
    return policy.model_copy(update={"steering_files": list(steering_files or [])})
