"""A loop: its body again and again until a condition holds or a validator passes, at most
max_iterations times; each round sees the validator's feedback on the one before."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentrun.spec import expressions, ir
from agentrun.spec.rules import extract_json
from agentrun.workflows import tracing
from agentrun.workflows.nodes.base import Handler

if TYPE_CHECKING:
    from agentrun.workflows.interpreter import Interpreter
    from agentrun.workflows.scope import Scope

KIND = ir.Loop


async def execute(engine: Interpreter, node: ir.Loop, scope: Scope) -> Any:
    feedback = scope.values.get("feedback")
    output = None
    for iteration in range(1, node.max_iterations + 1):
        with tracing.loop_round(node, scope, iteration):
            output = await engine.run(node.body, scope.with_values(feedback=feedback, iteration=iteration))
            passed, feedback = await _judge(engine, node, scope, output)
        if passed:
            return output
    engine.warn(scope, f"max iterations ({node.max_iterations}) reached without passing; kept the last output")
    return output


async def _judge(engine: Interpreter, node: ir.Loop, scope: Scope, output: Any) -> tuple[bool, Any]:
    """Did this round pass, and what feedback goes to the next one?"""
    if node.validator is None:
        if node.until is None:
            return True, None
        taken, warning = expressions.condition(node.until, engine.values(scope, output=output))
        if warning:
            engine.warn(scope, warning)
        return taken, None
    checked = scope.with_values(input=output).derived([str(engine.key_of(node.body, scope))])
    verdict = as_data(await engine.run(node.validator, checked))
    passed = isinstance(verdict, dict) and verdict.get("passed") is True
    return passed, None if passed else _feedback(engine, node, scope, verdict)


def _feedback(engine: Interpreter, node: ir.Loop, scope: Scope, verdict: Any) -> Any:
    if not node.feedback:
        return verdict.get("feedback", verdict) if isinstance(verdict, dict) else verdict
    # While the loop runs, steps.<loop id>.output is the validator's latest verdict.
    steps = {**engine.state.steps, node.id: {"output": verdict, "outputs": {}}}
    try:
        return expressions.resolve(node.feedback, engine.values(scope, steps=steps))
    except expressions.ExpressionError as exc:
        engine.warn(scope, f"no feedback at {node.feedback} ({exc}); passing the whole verdict")
        return verdict


def as_data(value: Any) -> Any:
    """A reply that holds JSON as the data it holds; anything else as it is."""
    if isinstance(value, str):
        try:
            return extract_json(value)
        except ValueError:
            return value
    return value


HANDLER = Handler(execute)
