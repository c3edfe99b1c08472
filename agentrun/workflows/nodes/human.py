"""A question to people as a step of its own: the run waits, durably, for an answer; its value is
the answer. A rejected approval fails the step when its gate says so."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from temporalio import workflow

from agentrun.lang import ir
from agentrun.workflows.failures import TaskFailed
from agentrun.workflows.humans import rejected
from agentrun.workflows.nodes import leaf
from agentrun.workflows.nodes.base import Handler

if TYPE_CHECKING:
    from agentrun.workflows.runtime import Runtime
    from agentrun.workflows.scope import Scope

KIND = ir.Human


async def execute(engine: Runtime, node: ir.Human, scope: Scope) -> Any:
    key = str(scope.key)
    async with leaf.Row(engine, key) as task:
        task.wait_for("human")
        answer = await engine.ask(node, scope)
        if node.approval and answer.value == ir.REJECT and node.on_reject == "fail":
            raise TaskFailed(key, rejected(node.id, answer))
    engine.state.finish(key, "completed", workflow.now(), output=answer.value or "")
    return answer.value


HANDLER = Handler(KIND, execute, own_timeout=True)
