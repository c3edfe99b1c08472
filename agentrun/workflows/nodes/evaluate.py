"""An evaluate node: a precondition. The run goes on when its condition holds; else the node fails
(and its failure policy decides: abort the run, skip, or fall back)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentrun.lang import expressions, ir
from agentrun.workflows.failures import TaskFailed
from agentrun.workflows.nodes.base import Handler

if TYPE_CHECKING:
    from agentrun.workflows.runtime import Runtime
    from agentrun.workflows.scope import Scope

KIND = ir.Evaluate


async def execute(engine: Runtime, node: ir.Evaluate, scope: Scope) -> bool:
    holds, warning = expressions.condition(node.condition, engine.values(scope))
    if warning:
        engine.warn(scope, warning)
    if not holds:
        raise TaskFailed(str(scope.key), f"precondition not met: {node.condition.strip()}")
    return True


HANDLER = Handler(KIND, execute)
