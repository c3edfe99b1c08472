"""A graph's supervisor: its agent picks which managed node runs next, or __done__, with its
reasons; each choice is kept in the run's supervisor_history. A choice outside the list is asked
again once with a reminder, then fails the node."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from temporalio import workflow

from agentrun.lang import ir
from agentrun.models.contract import SupervisorChoice
from agentrun.workflows.failures import TaskFailed
from agentrun.workflows.nodes.base import Handler
from agentrun.workflows.nodes.graph_agent import as_task, context, node_row, reply_object

if TYPE_CHECKING:
    from agentrun.workflows.runtime import Runtime
    from agentrun.workflows.scope import Scope

KIND = ir.Supervisor
ASKS = 2  # the first answer, then one more after a reminder


async def execute(engine: Runtime, node: ir.Supervisor, scope: Scope) -> Any:
    key = str(scope.key)
    made = sum(1 for c in engine.state.supervisor_history if c.supervisor_id == node.id)
    if made >= node.max_iterations:
        engine.warn(scope, f"supervisor made {made} choices (its max_iterations); the work is done")
        return ir.DONE
    allowed = [*node.managed, ir.DONE]
    text, reminder = _prompt(engine, node, scope), ""
    choice, reasoning = "", ""  # ASKS is at least one: the loop sets both
    async with node_row(engine, node, scope) as task:
        for _ in range(ASKS):
            task.count_iteration()
            reply = await engine.conversation.ask(as_task(node), scope, text + reminder, phase="choose")
            choice, reasoning = _choice(reply)
            if choice in allowed:
                break
            reminder = f"\n\nYour answer named {choice or 'no node'}; answer with one of: {', '.join(allowed)}."
        else:
            raise TaskFailed(key, f"chose '{choice}', which is not one of {', '.join(allowed)}")
    engine.state.finish(key, "completed", workflow.now(), output=f"{choice}: {reasoning}")
    engine.state.add_supervisor_choice(
        SupervisorChoice(
            supervisor_id=node.id,
            delegated_to=choice,
            reasoning=reasoning,
            iteration=made + 1,
            timestamp=workflow.now(),
        )
    )
    return choice


def _prompt(engine: Runtime, node: ir.Supervisor, scope: Scope) -> str:
    done = [f"- {c.delegated_to}: {c.reasoning}" for c in engine.state.supervisor_history if c.supervisor_id == node.id]
    parts = [context(engine, node.system, scope)]
    if node.prompt:
        parts.append(node.prompt)
    if done:
        parts.append("Your choices so far:\n" + "\n".join(done))
    parts.append(
        "Choose who works next: one of " + ", ".join(node.managed) + f", or {ir.DONE} when the goal is met. "
        'Reply with JSON: {"next_node": "<choice>", "reasoning": "<why>"}.'
    )
    return "\n\n".join(parts)


def _choice(reply: str) -> tuple[str, str]:
    data = reply_object(reply)
    if data is None:
        return reply.strip().splitlines()[0].strip() if reply.strip() else "", ""
    # next_node is cycgraph's field (its SupervisorDecisionSchema); next and choice are read as well.
    picked = data.get("next_node") or data.get("next") or data.get("choice")
    return str(picked or ""), str(data.get("reasoning") or "")


HANDLER = Handler(KIND, execute, own_timeout=True)
