"""A map: its body once per element of a list, at most `concurrency` at a time, each run as
`<map id>[i]`; then the optional reduce gets every result in the elements' order."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from temporalio import workflow

from agentrun.spec import expressions, ir
from agentrun.workflows.contract import TaskState
from agentrun.workflows.failures import TaskFailed
from agentrun.workflows.nodes.base import Handler
from agentrun.workflows.nodes.loop import as_data

if TYPE_CHECKING:
    from agentrun.workflows.interpreter import Interpreter
    from agentrun.workflows.scope import Scope

KIND = ir.Map


async def execute(engine: Interpreter, node: ir.Map, scope: Scope) -> Any:
    assert scope.key is not None
    items = _items(engine, node, scope)
    elements = [scope.key.element(i) for i in range(len(items))]
    rows = [
        TaskState(id=str(key), title=f"{node.body.label} #{i + 1}", kind=node.body.kind)
        for i, key in enumerate(elements)
    ]
    engine.state.expand(node.body.id, rows)
    results = await _run_elements(engine, node, scope, items)
    if node.reduce is None:
        return results
    return await engine.run(node.reduce, scope.with_values(input=results).derived([str(k) for k in elements]))


def _items(engine: Interpreter, node: ir.Map, scope: Scope) -> list[Any]:
    try:
        items = expressions.resolve(node.over, engine.values(scope))
    except expressions.ExpressionError as exc:
        raise TaskFailed(str(scope.key), f"cannot read the list to map over: {exc}") from None
    items = as_data(items)
    if not isinstance(items, list):
        raise TaskFailed(str(scope.key), f"map over {node.over} needs a list, got {type(items).__name__}")
    return items


async def _run_elements(engine: Interpreter, node: ir.Map, scope: Scope, items: list[Any]) -> list[Any]:
    """One run of the body per element, at most `concurrency` in flight; results in the elements' order."""
    assert scope.key is not None
    results: list[Any] = [None] * len(items)
    over = [str(path[1]) for path in expressions.references(node.over) if len(path) > 1 and path[0] == "steps"]
    running: dict[asyncio.Future, int] = {}
    try:
        for index, item in enumerate(items):
            if len(running) >= node.concurrency:
                await _collect(running, results)
            element = scope.with_values(item=item, index=index, input=item).derived(over)
            running[asyncio.ensure_future(engine.run(node.body, element, scope.key.element(index)))] = index
        while running:
            await _collect(running, results)
    finally:
        for fut in running:
            fut.cancel()
        if running:
            await workflow.wait(list(running))
    return results


async def _collect(running: dict[asyncio.Future, int], results: list[Any]) -> None:
    done, _ = await workflow.wait(list(running), return_when=asyncio.FIRST_COMPLETED)
    for fut in done:
        results[running.pop(fut)] = fut.result()  # a failed element fails the map


HANDLER = Handler(execute)
