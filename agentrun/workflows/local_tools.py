"""Tools the workflow answers itself, with no activity: cycgraph's built-in `save_to_memory`, which
an agent calls once per key to write several memory keys. As in cycgraph, the call only captures
the pair; when the node's value is written (nodes.graph_memory), the pairs it saved take the place
of its reply, each key kept only if the node's write_keys grant it, and keys starting with `_`
(the engine's own) never: agentrun.policy refuses them, as it decides every tool call."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from agentrun.lang.grants import SAVE_TO_MEMORY
from agentrun.models.tools import ToolCall, ToolResult, ToolSpec
from agentrun.policy import Asked, decide

if TYPE_CHECKING:
    from agentrun.workflows.tool_loop import Route, Toolbox

# cycgraph's own description and parameters, which its agents' prompts tell them to use.
SPECS = {
    SAVE_TO_MEMORY: ToolSpec(
        name=SAVE_TO_MEMORY,
        description="Save data to workflow memory for later use",
        parameters={
            "type": "object",
            "properties": {
                "key": {"type": "string", "description": "Memory key to store the value under"},
                "value": {"description": "Value to save (can be any type)"},
            },
            "required": ["key", "value"],
        },
    )
}


class Local:
    """The tool loop's source for workflow-local tools (workflows.tool_loop.SOURCES["local"])."""

    async def offer(self, box: Toolbox) -> list[tuple[ToolSpec, Route]]:
        from agentrun.workflows.tool_loop import Route

        return [(SPECS[name], Route("local", name)) for name in box.grant.local if name in SPECS]

    async def call(self, box: Toolbox, route: Route, call: ToolCall) -> ToolResult:
        key, value = call.arguments.get("key"), call.arguments.get("value")
        if not isinstance(key, str) or not key:
            return _error(call, "save_to_memory needs a `key`: the name of the memory key to write")
        decision = decide(box.policy, Asked("local", route.target, call.arguments))
        if decision.refused:  # "ask": the workflow had a person approve it first
            return _error(call, decision.reason, refused=True)
        box.conv.saved.setdefault(box.key, {})[key] = value
        return ToolResult(
            call_id=call.id, name=call.name, ok=True, content=json.dumps({"key": key, "value": value, "saved": True})
        )


def saved_updates(saved: dict[str, Any], write_keys: list[str]) -> dict[str, Any]:
    """The pairs a node saved that its write_keys grant (`*` grants any key not reserved)."""
    return {k: v for k, v in saved.items() if not k.startswith("_") and ("*" in write_keys or k in write_keys)}


def _error(call: ToolCall, why: str, refused: bool = False) -> ToolResult:
    return ToolResult(call_id=call.id, name=call.name, ok=False, content=why, error=why, refused=refused)
