"""The function tools the engine offers chat models, described once and written in each API's shape.
The workflow names a tool (spec.calls.SPAWN_AGENTS); what the model sees of it is decided here."""

from __future__ import annotations

from typing import Any

from agentrun.activities.agents._common import agent_error
from agentrun.models.calls import SPAWN_AGENTS, AgentCall

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


def openai_tools(call: AgentCall) -> list[dict[str, Any]]:
    """The call's tools as Chat Completions `tools`: each a function with its JSON Schema."""
    return [
        {"type": "function", "function": {"name": name, "description": about, "parameters": schema}}
        for name, about, schema in _offered(call)
    ]


def anthropic_tools(call: AgentCall) -> list[dict[str, Any]]:
    """The call's tools as Messages API `tools`: each a name, a description and an input_schema."""
    return [{"name": name, "description": about, "input_schema": schema} for name, about, schema in _offered(call)]


def _offered(call: AgentCall) -> list[tuple[str, str, dict[str, Any]]]:
    """The tools the spec grants, then the engine's own (spawn_agents)."""
    granted = [(spec.name, spec.description, spec.parameters) for spec in call.offered]
    return [*granted, *((n, *_about(n)) for n in call.tools)]


def _about(name: str) -> tuple[str, dict[str, Any]]:
    if name not in TOOLS:
        raise agent_error(f"no function tool named {name!r}; known: {', '.join(TOOLS)}")
    return TOOLS[name]
