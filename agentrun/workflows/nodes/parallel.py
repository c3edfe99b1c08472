"""A parallel node: its children at once, done when its wait policy (all, any, or a count) is met;
the branches still running are cancelled. Its timeout bounds the wait."""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from temporalio import workflow

from agentrun.lang import ir
from agentrun.workflows.failures import TaskFailed
from agentrun.workflows.nodes.base import Handler

if TYPE_CHECKING:
    from agentrun.workflows.runtime import Runtime
    from agentrun.workflows.scope import Scope

KIND = ir.Parallel


async def execute(engine: Runtime, node: ir.Parallel, scope: Scope) -> Any:
    branches = {asyncio.ensure_future(engine.run(child, scope)): child for child in node.children}
    need = len(branches) if node.wait == "all" else 1 if node.wait == "any" else node.wait
    results: dict[str, Any] = {}
    failures: list[BaseException] = []
    pending = set(branches)
    deadline = workflow.time() + node.timeout_s if node.timeout_s else None
    while pending and len(results) < need and len(failures) <= len(branches) - need:
        timeout = max(deadline - workflow.time(), 0) if deadline is not None else None
        done, pending = await workflow.wait(pending, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if not done:
            break
        for fut in done:
            failure = fut.exception()
            if failure is None:
                results[branches[fut].id] = fut.result()
            else:
                failures.append(failure)
    timed_out = deadline is not None and bool(pending) and workflow.time() >= deadline
    await _stop(engine, scope, pending, _why_stopped(node, timed_out, len(results) >= need, failures))
    if timed_out:
        _timed_out(engine, node, scope, [branches[f] for f in pending], results, failures)
    if len(results) < need:
        raise failures[0]
    return _joined(node, results)


async def _stop(engine: Runtime, scope: Scope, pending: Collection[asyncio.Future], why: str) -> None:
    for fut in pending:
        fut.cancel()
    if pending:
        await workflow.wait(pending)
        engine.warn(scope, f"{len(pending)} branch(es) cancelled once {why}")


def _why_stopped(node: ir.Parallel, timed_out: bool, met: bool, failures: list[BaseException]) -> str:
    """What ended the wait, for the warning that says which branches it cancelled."""
    if timed_out:
        return f"the step's timeout ({node.timeout_s:g}s) passed"
    if met:
        return f"the wait policy ({node.wait}) was met"
    failed = ", ".join(f.task_id if isinstance(f, TaskFailed) else type(f).__name__ for f in failures)
    return f"{failed} failed, so the wait policy ({node.wait}) could no longer be met"


def _timed_out(
    engine: Runtime,
    node: ir.Parallel,
    scope: Scope,
    children: list[ir.NodeBase],
    results: dict[str, Any],
    failures: list[BaseException],
) -> None:
    """Past the step's timeout each unfinished agent gets its own failure policy: skip, or fail."""
    assert node.timeout_s is not None
    for child in children:
        reason = f"step {node.id} timed out after {node.timeout_s:g}s"
        if child.on_failure == "skip":
            results[child.id] = engine.skipped(child, scope.at(engine.key_of(child, scope)), f"{reason}; skipped")
        else:
            failures.append(TaskFailed(str(engine.key_of(child, scope)), reason))


def _joined(node: ir.Parallel, results: dict[str, Any]) -> Any:
    """Keyed outputs when the branches have output keys (numbered steps), else the texts joined."""
    if any(child.output_key for child in node.children):
        return {child.output_key or child.id: results.get(child.id) for child in node.children}
    return "\n\n".join(str(results[c.id]) for c in node.children if results.get(c.id))


HANDLER = Handler(KIND, execute, own_timeout=True)
