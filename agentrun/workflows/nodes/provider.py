"""A provider call: a registered provider's method with its params filled in; no agent."""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio import workflow

from agentrun.lang import ir
from agentrun.lang.render import render, render_value
from agentrun.models import calls
from agentrun.workflows import activity_calls
from agentrun.workflows.nodes import leaf
from agentrun.workflows.nodes.base import Handler

if TYPE_CHECKING:
    from agentrun.workflows.runtime import Runtime
    from agentrun.workflows.scope import Scope

KIND = ir.Provider
DEFAULT_TIMEOUT_S = 600


async def execute(engine: Runtime, node: ir.Provider, scope: Scope) -> str:
    return await leaf.perform(
        engine, node, scope, lambda task: leaf.checked(engine, node, scope, task, lambda _: _call(engine, node, scope))
    )


async def _call(engine: Runtime, node: ir.Provider, scope: Scope) -> str:
    key = str(scope.key)
    values = engine.values(scope)
    output_file = node.call.output_file
    arg = calls.ProviderCall(
        task_id=key,
        workdir=engine.inp.workdir,
        provider=node.call.provider,
        method=node.call.method,
        params=render_value(node.call.params, values, engine.inp.plan.undefined),
        output_file=render(output_file, values, engine.inp.plan.undefined) if output_file else None,
    )
    result = await activity_calls.perform(
        key,
        calls.CALL_PROVIDER,
        arg,
        calls.ProviderResult,
        summary=f"{node.label}: {node.call.provider}.{node.call.method}",
        timeout_s=node.timeout_s or DEFAULT_TIMEOUT_S,
        # The activity heartbeats every second: a dead worker's call is retried (same key) in
        # heartbeat_s instead of at the end of the step's timeout.
        heartbeat_s=engine.inp.heartbeat_s if workflow.patched(PROVIDER_HEARTBEAT) else None,
    )
    return result.text


PROVIDER_HEARTBEAT = "provider-calls-heartbeat"


HANDLER = Handler(KIND, execute, work=True, own_timeout=True)
