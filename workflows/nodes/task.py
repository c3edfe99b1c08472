"""An agent task: its reply protocol prompts the agent; success criteria check the work after it."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from spec import calls, ir
from spec.render import render_value
from workflows import activity_calls
from workflows.contract import TaskState
from workflows.failures import TaskFailed
from workflows.nodes import leaf
from workflows.nodes.base import Handler
from workflows.protocols import PROTOCOLS

if TYPE_CHECKING:
    from workflows.interpreter import Interpreter
    from workflows.scope import Scope

KIND = ir.Task


async def execute(engine: Interpreter, node: ir.Task, scope: Scope) -> Any:
    cancelled = False
    try:
        return await leaf.perform(engine, node, scope, lambda task: _attempts(engine, node, scope, task))
    except asyncio.CancelledError:
        cancelled = True  # the driver stops a cancelled task's agent itself
        raise
    finally:
        if not cancelled and engine.conversation.restarts(node):
            await engine.conversation.release(node, scope)


async def _attempts(engine: Interpreter, node: ir.Task, scope: Scope, task: TaskState) -> Any:
    """The protocol's reply, again with the check's error while the success criteria fail."""
    task.agent = node.agent
    protocol = PROTOCOLS[node.protocol]
    retries = node.criteria.max_retries if node.criteria else 0
    error: str | None = None
    for attempt in range(1, retries + 2):
        task.attempts = attempt
        reply = await protocol.perform(engine, node, scope, task, error)
        if not node.criteria:
            return reply
        check = await _criteria(engine, node, node.criteria, scope)
        if check.ok:
            return reply
        error = check.error
        engine.state.warnings.append(f"{scope.key}: success criteria failed (attempt {attempt}): {error}")
    raise TaskFailed(str(scope.key), f"success criteria failed after {retries + 1} attempt(s): {error}")


async def _criteria(engine: Interpreter, node: ir.Task, crit: ir.Criteria, scope: Scope) -> calls.CheckResult:
    key = str(scope.key)
    arg = calls.CriteriaCall(
        task_id=key,
        workdir=engine.inp.workdir,
        spec_dir=engine.inp.plan.spec_dir,
        python=render_value(crit.python, engine.values()) if crit.python else None,
        script=crit.script,
        timeout_s=crit.timeout_s,
    )
    return await activity_calls.perform(
        key,
        calls.CHECK_CRITERIA,
        arg,
        calls.CheckResult,
        summary=f"{node.label}: success criteria",
        timeout_s=crit.timeout_s + 30,
        heartbeat_s=engine.inp.heartbeat_s,
    )


HANDLER = Handler(execute, work=True, own_timeout=True)
