"""What every leaf that does work shares: its row in the run state, its preconditions, its taint."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from temporalio import workflow

from agentrun.lang import ir
from agentrun.lang.render import render, to_text
from agentrun.models import calls
from agentrun.models.contract import TaskState
from agentrun.workflows import activity_calls, metrics, taint
from agentrun.workflows.failures import TaskFailed, unexpected

if TYPE_CHECKING:
    from agentrun.workflows.runtime import Runtime
    from agentrun.workflows.scope import Scope


async def perform(
    engine: Runtime, node: ir.Task | ir.Provider, scope: Scope, work: Callable[[TaskState], Awaitable[Any]]
) -> Any:
    """Run `work` as the node's row: running, then completed with its output, failed or cancelled."""
    key = str(scope.key)
    workflow.set_current_details(f"Running **{node.label}** ({node.kind})")
    async with Row(engine, key) as task:
        if node.preconditions:
            await check_preconditions(engine, node, scope)
        output = await work(task)
    engine.state.finish(key, "completed", workflow.now(), output=to_text(output))
    taint.mark_leaf(node, key, engine.state, scope)
    return output


class Row(contextlib.AbstractAsyncContextManager[TaskState]):
    """A node's row in the run state while it works: running, then failed or cancelled if it ends
    so; the caller finishes it as completed, with the output it shows. A class, not a generator:
    every step enters one."""

    def __init__(self, engine: Runtime, key: str) -> None:
        self.state, self.key = engine.state, key

    async def __aenter__(self) -> TaskState:
        return self.state.begin(self.key, workflow.now())

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None, _tb: object) -> None:
        if exc is None:
            return
        if isinstance(exc, TaskFailed):
            self.state.finish(self.key, "failed", workflow.now(), error=exc.message)
        elif isinstance(exc, asyncio.CancelledError):
            self.state.finish(self.key, "cancelled", workflow.now(), error="cancelled")
        elif isinstance(exc, Exception):  # a template that cannot be filled in: the node fails with the reason
            self.state.finish(self.key, "failed", workflow.now(), error=unexpected(exc))
            raise TaskFailed(self.key, unexpected(exc)) from None


async def checked(
    engine: Runtime,
    node: ir.Task | ir.Provider,
    scope: Scope,
    task: TaskState,
    work: Callable[[str | None], Awaitable[Any]],
) -> Any:
    """`work`'s value once the node's success criteria pass; while they fail, `work` runs again
    with the check's error, up to `max_retries` more times."""
    crit = node.criteria
    retries = crit.max_retries if crit else 0
    error: str | None = None
    for attempt in range(1, retries + 2):
        task.start_attempt(attempt)
        value = await work(error)
        if crit is None:
            return value
        check = await _criteria(engine, node, crit, scope)
        if check.ok:
            return value
        error = check.error
        metrics.failed("success_check")
        engine.warn(scope, f"success criteria failed (attempt {attempt}): {error}")
    raise TaskFailed(str(scope.key), f"success criteria failed after {retries + 1} attempt(s): {error}")


async def _criteria(engine: Runtime, node: ir.Task | ir.Provider, crit: ir.Criteria, scope: Scope) -> calls.CheckResult:
    key = str(scope.key)
    arg = calls.CriteriaCall(
        task_id=key,
        workdir=engine.inp.workdir,
        spec_dir=engine.inp.plan.spec_dir,
        python=render(crit.python, engine.trusted_values(), engine.inp.plan.undefined) if crit.python else None,
        script=crit.script,
        timeout_s=crit.timeout_s,
        values={**engine.state.memory, "steps": engine.state.steps, "human": engine.state.human},
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


async def check_preconditions(engine: Runtime, node: ir.NodeBase, scope: Scope) -> None:
    """Copy the node's sync targets in and check the files it needs; TaskFailed if they are not there."""
    pre = node.preconditions
    assert pre is not None
    key = str(scope.key)
    arg = calls.PreconditionCall(
        task_id=key,
        workdir=engine.inp.workdir,
        spec_dir=engine.inp.plan.spec_dir,
        files_exist=pre.files_exist,
        min_count=pre.min_count,
        sync_targets=pre.sync_targets,
    )
    result = await activity_calls.perform(
        key, calls.CHECK_PRECONDITIONS, arg, calls.CheckResult, summary=f"{node.label}: preconditions", timeout_s=300
    )
    for warning in result.warnings:
        engine.warn(scope, warning)
    if not result.ok:
        raise TaskFailed(key, f"precondition failed: {result.error}")
