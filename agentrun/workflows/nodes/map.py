"""A map: its body once per element of a list, at most `concurrency` at a time, each run as
`<map id>[i]`; then the optional reduce gets every result in the elements' order. A list longer than
the map's `batch` runs in batches, each a child workflow (`workflows.map_batches`).

With `fail_fast` the first element that fails fails the map, and the elements still running are
cancelled; with `best_effort` a failed element is recorded and the others go on."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from temporalio import workflow

from agentrun.lang import expressions, ir
from agentrun.workflows.batching import element_input, element_rows, steps_read
from agentrun.workflows.failures import TaskFailed
from agentrun.workflows.map_batches import MAP_BATCHES, Batched
from agentrun.workflows.nodes.base import Handler
from agentrun.workflows.nodes.json_path import MISSING, JsonPathError, read_path
from agentrun.workflows.nodes.loop import as_data

if TYPE_CHECKING:
    from agentrun.workflows.runtime import Runtime
    from agentrun.workflows.scope import Scope

KIND = ir.Map


async def execute(engine: Runtime, node: ir.Map, scope: Scope) -> Any:
    assert scope.key is not None
    items = _items(engine, node, scope)
    if node.max_items is not None and len(items) > node.max_items:
        message = f"{len(items)} items, over its max_items of {node.max_items}; split the list or raise max_items"
        raise TaskFailed(str(scope.key), message)
    if len(items) > node.batch and workflow.patched(MAP_BATCHES):
        results, errors, row = await Batched(engine, node, scope, items).run()
        derived = [row]
    else:
        rows = element_rows(node.body, scope.key, range(len(items)))
        engine.state.expand(node.body.id, rows)
        results, errors = await _run_elements(engine, node, scope, items)
        derived = [row.id for row in rows]
    if node.outcomes:
        failed = {e["index"] for e in errors}
        done = [{"index": i, "value": v} for i, v in enumerate(results) if i not in failed]
        return {"results": done, "errors": errors}
    if node.reduce is None:
        return results
    return await engine.run(node.reduce, scope.with_values(input=results).derived(derived))


def _items(engine: Runtime, node: ir.Map, scope: Scope) -> list[Any]:
    if node.items is not None:
        return list(node.items)
    if node.items_path:
        return _items_at_path(engine, node, scope)
    try:
        items = expressions.resolve(node.over, engine.values(scope))
    except expressions.ExpressionError as exc:
        raise TaskFailed(str(scope.key), f"cannot read the list to map over: {exc}") from None
    items = as_data(items)
    if not isinstance(items, list):
        raise TaskFailed(str(scope.key), f"map over {node.over} needs a list, got {type(items).__name__}")
    return items


def _items_at_path(engine: Runtime, node: ir.Map, scope: Scope) -> list[Any]:
    """The list a JSON path finds in the map's view: the memory it reads, the goal, the constraints."""
    params = engine.inp.params
    view = {
        "memory": scope.values.get("input") or {},
        "goal": params.get("goal") or engine.inp.plan.goal,
        "constraints": params.get("constraints") or [],
    }
    try:
        found = read_path(node.items_path, view)
    except JsonPathError as exc:
        raise TaskFailed(str(scope.key), str(exc)) from None
    if found is MISSING:
        seen = ", ".join(sorted(view["memory"])) or "nothing"
        message = f"items_path {node.items_path} finds nothing in what the map reads (memory: {seen})"
        raise TaskFailed(str(scope.key), message)
    found = as_data(found)
    if not isinstance(found, list):
        raise TaskFailed(str(scope.key), f"items_path {node.items_path} is a {type(found).__name__}, not a list")
    return found


async def _run_elements(
    engine: Runtime, node: ir.Map, scope: Scope, items: list[Any]
) -> tuple[list[Any], list[dict[str, Any]]]:
    """One run of the body per element, at most `concurrency` in flight; results in the elements'
    order, and the elements that failed under best_effort."""
    assert scope.key is not None
    results: list[Any] = [None] * len(items)
    errors: list[dict[str, Any]] = []
    over = steps_read(node.over)
    running: dict[asyncio.Future, int] = {}
    try:
        for index, item in enumerate(items):
            if len(running) >= node.concurrency:
                await _collect(node, running, results, errors)
            given = element_input(node.outcomes, scope.values.get("input"), item, index, len(items))
            element = scope.with_values(item=item, index=index, input=given)
            running[asyncio.ensure_future(engine.run(node.body, element.derived(over), scope.key.element(index)))] = (
                index
            )
        while running:
            await _collect(node, running, results, errors)
    finally:
        for fut in running:
            fut.cancel()
        if running:
            await workflow.wait(list(running))
    return results, sorted(errors, key=lambda e: e["index"])


async def _collect(
    node: ir.Map, running: dict[asyncio.Future, int], results: list[Any], errors: list[dict[str, Any]]
) -> None:
    done, _ = await workflow.wait(list(running), return_when=asyncio.FIRST_COMPLETED)
    for fut in sorted(done, key=running.__getitem__):  # a set's order is not the same on replay
        index = running.pop(fut)
        failure = fut.exception()
        if isinstance(failure, TaskFailed) and node.error_strategy == "best_effort":
            errors.append({"index": index, "error": failure.message})
        else:
            results[index] = fut.result()  # under fail_fast a failed element fails the map


HANDLER = Handler(KIND, execute)
