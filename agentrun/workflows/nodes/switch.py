"""A switch: the first case whose condition holds runs, else the default."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentrun.lang import expressions, ir
from agentrun.workflows.nodes.base import Handler

if TYPE_CHECKING:
    from agentrun.workflows.runtime import Runtime
    from agentrun.workflows.scope import Scope

KIND = ir.Switch


async def execute(engine: Runtime, node: ir.Switch, scope: Scope) -> Any:
    values = engine.values(scope)
    for case in node.cases:
        taken, warning = expressions.condition(case.when, values)
        if warning:
            engine.warn(scope, warning)
        if taken:
            return await engine.run(case.node, scope)
    return await engine.run(node.default, scope) if node.default else None


HANDLER = Handler(KIND, execute)
