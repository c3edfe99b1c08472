"""A sequence: its children one after another; its value is the last one's."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentrun.lang import ir
from agentrun.workflows.nodes.base import Handler

if TYPE_CHECKING:
    from agentrun.workflows.runtime import Runtime
    from agentrun.workflows.scope import Scope

KIND = ir.Sequence


async def execute(engine: Runtime, node: ir.Sequence, scope: Scope) -> Any:
    output = None
    for child in node.children:
        output = await engine.run(child, scope)
    return output


HANDLER = Handler(KIND, execute)
