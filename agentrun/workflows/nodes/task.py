"""An agent task: its reply protocol prompts the agent; success criteria check the work after it."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from agentrun.lang import ir
from agentrun.models.contract import TaskState
from agentrun.workflows.nodes import leaf
from agentrun.workflows.nodes.base import Handler
from agentrun.workflows.protocols.registry import PROTOCOLS

if TYPE_CHECKING:
    from agentrun.workflows.runtime import Runtime
    from agentrun.workflows.scope import Scope

KIND = ir.Task


async def execute(engine: Runtime, node: ir.Task, scope: Scope) -> Any:
    cancelled = False
    try:
        return await leaf.perform(engine, node, scope, lambda task: _attempts(engine, node, scope, task))
    except asyncio.CancelledError:
        cancelled = True  # the driver stops a cancelled task's agent itself
        raise
    finally:
        if not cancelled and engine.conversation.restarts(node):
            await engine.conversation.release(node, scope)


async def _attempts(engine: Runtime, node: ir.Task, scope: Scope, task: TaskState) -> Any:
    """The protocol's reply, sent again with the check's error while the success criteria fail."""
    if task.agent != node.agent:  # its row names the agent from the start; a pydantic write costs
        task.run_by(node.agent)
    protocol = PROTOCOLS[node.protocol]
    return await leaf.checked(
        engine, node, scope, task, lambda error: protocol.perform(engine, node, scope, task, error)
    )


HANDLER = Handler(KIND, execute, work=True, own_timeout=True)
