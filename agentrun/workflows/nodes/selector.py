"""A selector: its children in order until one succeeds; it fails when every one has."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentrun.lang import ir
from agentrun.workflows import routing
from agentrun.workflows.failures import TaskFailed
from agentrun.workflows.nodes.base import Handler

if TYPE_CHECKING:
    from agentrun.workflows.runtime import Runtime
    from agentrun.workflows.scope import Scope

KIND = ir.Selector


async def execute(engine: Runtime, node: ir.Selector, scope: Scope) -> Any:
    errors = []
    for position, child in enumerate(node.children, 1):
        before = routing.mark(engine.state)
        try:
            return await engine.run(child, scope)
        except TaskFailed as exc:
            errors.append(exc.message)
            if position < len(node.children):  # the next alternative runs: this one was not taken
                routing.not_taken(engine.state, before)
    raise TaskFailed(str(scope.key), "every alternative failed: " + "; ".join(errors))


HANDLER = Handler(KIND, execute)
