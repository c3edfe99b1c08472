"""Asking the agent of a graph node that is not a plain task (a supervisor, an LLM judge): the
node stands in as a task of its agent, so budgets, usage and the transcript work as for tasks."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from agentrun.lang import ir
from agentrun.lang.rules import extract_json
from agentrun.models.contract import TaskState
from agentrun.workflows.conversation import goal_line
from agentrun.workflows.nodes.leaf import Row

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    from agentrun.workflows.runtime import Runtime
    from agentrun.workflows.scope import Scope


def as_task(node: ir.Supervisor | ir.Verifier) -> ir.Task:
    return ir.Task(id=node.id, title=node.title, agent=node.agent, timeout_s=node.timeout_s, protocol="plain")


def node_row(
    engine: Runtime, node: ir.Supervisor | ir.Verifier, scope: Scope
) -> AbstractAsyncContextManager[TaskState]:
    """The node's row while its agent works, titled and typed as people should see it."""
    key = str(scope.key)
    engine.state.add_row_if_new(TaskState(id=key, title=node.label, kind=node.kind, agent=node.agent))
    return Row(engine, key)


def context(engine: Runtime, system: str | None, scope: Scope) -> str:
    """The opening of a graph agent's prompt: its system text, the goal and the memory it reads."""
    params = engine.inp.params
    parts = [system] if system else []
    parts.append(goal_line(params.get("goal") or engine.inp.plan.goal))
    constraints = params.get("constraints") or []
    if constraints:
        parts.append("Constraints:\n" + "\n".join(f"- {c}" for c in constraints))
    parts.append("Memory:\n" + json.dumps(scope.values.get("input") or {}, indent=2, default=str))
    return "\n\n".join(parts)


def reply_object(text: str) -> dict[str, Any] | None:
    try:
        value = extract_json(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
