"""Running the sub-agents a goal's agent asks for with spawn_agents: in parallel, each an activity of
its own (so the ones that finished are not asked again after a worker crash), isolated (a fresh
context, the parent's agent and nothing more, no tools), one level deep. Their cost is counted on
the parent; the run state lists them under it."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from agentrun.lang import ir
from agentrun.lang.render import clip
from agentrun.models import calls
from agentrun.models.contract import SpawnedAgent
from agentrun.models.drivers import driver_of
from agentrun.models.texts.spawn_text import Ask, Request, follow_up, results, sub_agent, wants_to_spawn
from agentrun.workflows.failures import TaskFailed
from agentrun.workflows.scope import Scope
from agentrun.workflows.taint import fence

if TYPE_CHECKING:
    from agentrun.workflows.conversation import Conversation

MAX_CALLS = 5  # spawn requests one prompt may make; later ones are refused, and one more fails it
_KEPT_OUTPUT = 4000  # characters of a sub-agent's reply the run state keeps
DEPTH = "sub-agents cannot start sub-agents of their own (depth 1); its request was refused"


async def answer(conv: Conversation, node: ir.Task, scope: Scope, ask: Ask, *, refuse: bool) -> str:
    """Do one spawn request and say how it went, as the tool's result."""
    if refuse:
        return f"{calls.SPAWN_AGENTS} refused: this step already made {MAX_CALLS} requests; finish with what you have."
    if ask.error:
        return f"{calls.SPAWN_AGENTS} failed: {ask.error}"
    earlier = len(conv.state.spawned.get(str(scope.key), []))
    numbered = list(enumerate(ask.agents, earlier + 1))  # numbers go on across a step's requests
    records = [_record(str(scope.key), n, r) for n, r in numbered]
    conv.state.add_spawned(str(scope.key), records)
    outcomes = await asyncio.gather(*(_run(conv, node, scope, n, r, q) for (n, q), r in zip(numbered, records)))
    fenced = fence if conv.inp.plan.security == "paranoid" else str
    return results([(r.role, fenced(o)) for r, o in zip(records, outcomes)])


def go_on(
    exchange: list[calls.ChatMessage],
    prompt: str,
    task: str,
    reply: calls.AgentReply,
    asks: list[Ask],
    answers: list[str],
    tools: bool,
) -> tuple[list[calls.ChatMessage], str]:
    """The conversation after a spawn: the call and its results as turns of a chat API (and no new
    prompt), or, for an agent that writes blocks, the task again with the results."""
    if not tools:
        return exchange, follow_up(task, answers)
    asked = [calls.ChatMessage(role="user", content=prompt)] if prompt else []
    called = calls.ChatMessage(role="assistant", content=reply.text, tool_calls=reply.tool_calls)
    done = [calls.ChatMessage(role="tool", content=a, tool_call_id=q.call_id) for q, a in zip(asks, answers)]
    return [*exchange, *asked, called, *done], ""


def _record(parent: str, n: int, request: Request) -> SpawnedAgent:
    return SpawnedAgent(key=f"{parent}/agent-{n}", role=request.role, task=request.task)


async def _run(conv: Conversation, node: ir.Task, scope: Scope, n: int, record: SpawnedAgent, request: Request) -> str:
    """Run one sub-agent and keep how it went in its record; what the parent is told of it."""
    uri = conv.inp.agent_uri(node.agent)
    driver = driver_of(uri)
    system, task = sub_agent(request, conv.inp.plan.research_scope)
    call = calls.AgentCall(
        run_id=conv.state.run_id,
        task_id=record.key,
        agent_id=record.key,
        uri=uri,
        prompt=task if driver.chat else f"{system}\n\n{task}",
        workdir=conv.inp.workdir,
        # Its own context: a private agent where agents are servers, a conversation of its own elsewhere.
        lifecycle="refresh" if driver.restarts else "reuse",
        transcript=[calls.ChatMessage(role="system", content=system)] if driver.chat else [],
        timeout_s=node.timeout_s or calls.DEFAULT_AGENT_TIMEOUT_S,
    )
    try:
        reply = await conv.send(node, scope, call, f"{node.label}: sub-agent {n} ({record.role})", f"sub-agent {n}")
    except TaskFailed as exc:
        record.end("failed", exc.message)
        return f"error: {exc.message}"
    finally:
        if driver.restarts:
            await conv.release_call(call, f"{node.label}: stop sub-agent {n}")
    if wants_to_spawn(reply):
        record.end("refused", DEPTH, reply.usage)
        return f"error: {DEPTH}"
    text = reply.text
    record.end("completed", clip(text, _KEPT_OUTPUT), reply.usage)
    return text
