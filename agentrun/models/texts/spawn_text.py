"""spawn_agents in words: how a goal's agent is told it may start sub-agents, how its requests are
read (function calls from a chat model, a fenced `spawn_agents` block from any other agent), what a
sub-agent is asked, and the results handed back. Pure functions, so the workflow can replay them."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, cast

from agentrun.models.calls import SPAWN_AGENTS, AgentReply

MAX_AGENTS = 10  # sub-agents one request may start
_BLOCK = re.compile(r"```spawn_agents[ \t]*\n(.*?)```", re.DOTALL)
_SHAPE = '[{"role": "market-researcher", "task": "everything it needs", "outputs": ["optional", "fields"]}]'


@dataclass(frozen=True)
class Request:
    role: str
    task: str
    outputs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Ask:
    """One spawn_agents request in a reply: a function call (`call_id`) or a fenced block (no id)."""

    call_id: str = ""
    agents: list[Request] = field(default_factory=list[Request])
    error: str = ""  # why it cannot be done; then it starts nothing


def offer(tools: bool) -> str:
    """The EXECUTE prompt's word on sub-agents, for a model offered the tool or an agent that writes a block."""
    if tools:
        how = f"call the {SPAWN_AGENTS} tool"
    else:
        how = (
            f"reply with only a fenced block, then wait for their results:\n```{SPAWN_AGENTS}\n{_SHAPE}\n```\n"
            "You will be given the task again with their results"
        )
    return (
        "You may hand independent parts of this work to sub-agents that run in parallel, each in its own "
        f"context (they see nothing of yours, so give each everything it needs). To do so, {how}. "
        "Do simple work yourself."
    )


def asks(reply: AgentReply, tools: bool) -> list[Ask]:
    """The spawn requests in a reply; a function call for another tool is answered with an error."""
    if tools:
        return [_from_call(c.id, c.name, c.arguments) for c in reply.tool_calls]
    return [_read(block) for block in _BLOCK.findall(reply.text)]


def wants_to_spawn(reply: AgentReply) -> bool:
    return bool(reply.tool_calls or _BLOCK.search(reply.text))


def sub_agent(request: Request, research_scope: str) -> tuple[str, str]:
    """A sub-agent's system text and task."""
    system = f"You are a {request.role}. Complete the task and return your findings."
    if research_scope:
        system += f"\n\nResearch scope (stay within it): {research_scope}"
    task = request.task
    if request.outputs:
        task += f"\n\nEnd your reply with a JSON object with the fields {', '.join(request.outputs)}."
    return system, task


def results(outcomes: list[tuple[str, str]]) -> str:
    """The tool's result: an `Agent i (role):` block for each (role, outcome), in the order asked."""
    return "\n\n---\n\n".join(f"Agent {i} ({role}):\n{text}" for i, (role, text) in enumerate(outcomes, 1))


def follow_up(prompt: str, answers: list[str]) -> str:
    """For an agent that may keep no conversation: the task again, with what its sub-agents found."""
    found = "\n\n---\n\n".join(answers)
    return (
        f"{prompt}\n\nYou asked for sub-agents; their results, in the order you asked:\n\n{found}\n\n"
        "Use them and finish the work as asked above; do not ask for the same sub-agents again."
    )


def _from_call(call_id: str, name: str, arguments: str) -> Ask:
    if name != SPAWN_AGENTS:
        return Ask(call_id, error=f"there is no tool {name!r}; the one tool is {SPAWN_AGENTS}")
    try:
        data = json.loads(arguments)
    except ValueError as exc:
        return Ask(call_id, error=f"its arguments are not JSON: {exc}")
    return Ask(call_id, *_read_agents(data))


def _read(block: str) -> Ask:
    try:
        data = json.loads(block)
    except ValueError as exc:
        return Ask(error=f"the {SPAWN_AGENTS} block is not JSON: {exc}")
    return Ask("", *_read_agents(data))


def _read_agents(data: Any) -> tuple[list[Request], str]:
    """The requested sub-agents (`{"agents": [...]}` or the bare list), or none and why not."""
    found: Any = cast(dict[str, Any], data).get("agents") if isinstance(data, dict) else data
    if not isinstance(found, list) or not found:
        return [], f"expected a non-empty list of sub-agents, each {{role, task, outputs?}}; the shape is {_SHAPE}"
    items = cast(list[Any], found)
    if len(items) > MAX_AGENTS:
        return [], f"{len(items)} sub-agents asked for; at most {MAX_AGENTS} at once"
    agents: list[Request] = []
    for i, item in enumerate(items, 1):
        fields = cast(dict[str, Any], item) if isinstance(item, dict) else {}
        role, task = fields.get("role"), fields.get("task")
        outputs: Any = fields.get("outputs") or []
        if not isinstance(role, str) or not role.strip() or not isinstance(task, str) or not task.strip():
            return [], f"sub-agent {i} needs a non-empty role and task"
        if not isinstance(outputs, list) or not all(isinstance(o, str) for o in cast(list[Any], outputs)):
            return [], f"sub-agent {i}: outputs must be a list of field names"
        agents.append(Request(role.strip(), task.strip(), tuple(cast(list[str], outputs))))
    return agents, ""
