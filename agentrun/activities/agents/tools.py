"""The function tools the engine offers chat models, described once and written in each API's shape.
The workflow names a tool (spec.calls.SPAWN_AGENTS); what the model sees of it is decided here."""

from __future__ import annotations

from typing import Any

from agentrun.activities.agents._common import agent_error
from agentrun.models.calls import SPAWN_AGENTS

_SPAWN_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "agents": {
            "type": "array",
            "description": "The sub-agents, run in parallel; their results come back in this order.",
            "items": {
                "type": "object",
                "properties": {
                    "role": {"type": "string", "description": "What the sub-agent is, e.g. market-researcher"},
                    "task": {"type": "string", "description": "Everything it needs to do its part"},
                    "outputs": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Fields of a JSON object it should end its reply with",
                    },
                },
                "required": ["role", "task"],
            },
        }
    },
    "required": ["agents"],
}

TOOLS: dict[str, tuple[str, dict[str, Any]]] = {
    SPAWN_AGENTS: (
        "Start sub-agents that work in parallel, each in its own context with no access to yours, "
        "and get their results in order. They cannot start sub-agents of their own.",
        _SPAWN_PARAMETERS,
    )
}


def openai_tools(names: list[str]) -> list[dict[str, Any]]:
    return [
        {"type": "function", "function": {"name": n, "description": _about(n)[0], "parameters": _about(n)[1]}}
        for n in names
    ]


def anthropic_tools(names: list[str]) -> list[dict[str, Any]]:
    return [{"name": n, "description": _about(n)[0], "input_schema": _about(n)[1]} for n in names]


def _about(name: str) -> tuple[str, dict[str, Any]]:
    if name not in TOOLS:
        raise agent_error(f"no function tool named {name!r}; known: {', '.join(TOOLS)}")
    return TOOLS[name]
