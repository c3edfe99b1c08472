"""A loop: its body again and again until a condition holds or a validator passes, at most
max_iterations times; each round sees the validator's feedback on the one before."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentrun.lang import expressions, ir
from agentrun.lang.rules import extract_json
from agentrun.workflows import tracing
from agentrun.workflows.nodes.base import Handler

if TYPE_CHECKING:
    from agentrun.workflows.runtime import Runtime
    from agentrun.workflows.scope import Scope

KIND = ir.Loop


async def execute(engine: Runtime, node: ir.Loop, scope: Scope) -> Any:
    first, feedback, output = _resumed(engine, scope) or (1, scope.values.get("feedback"), None)
    for iteration in range(first, node.max_iterations + 1):
        if iteration > first:
            _round_starts(engine, scope, iteration, feedback, output)
        in_round = scope.in_round(iteration)
        with tracing.loop_round(node, scope, iteration):
            output = await engine.run(node.body, in_round.with_values(feedback=feedback, iteration=iteration))
            passed, feedback = await _judge(engine, node, in_round, output)
        if passed:
            return output
    engine.warn(scope, f"max iterations ({node.max_iterations}) reached without passing; kept the last output")
    return output


def _resumed(engine: Runtime, scope: Scope) -> tuple[int, Any, Any] | None:
    """The round a loop was in when the run continued as new, with the feedback and output it had."""
    point = engine.journal.get(scope.path + "#round")
    return (point["iteration"], point["feedback"], point["output"]) if point else None


def _round_starts(engine: Runtime, scope: Scope, iteration: int, feedback: Any, output: Any) -> None:
    """What a run that continues as new needs to start this round again: not the rounds before it."""
    engine.journal.forget_under(f"{scope.path}@{iteration - 1}")
    engine.journal.mark(scope.path + "#round", {"iteration": iteration, "feedback": feedback, "output": output})


async def _judge(engine: Runtime, node: ir.Loop, scope: Scope, output: Any) -> tuple[bool, Any]:
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


def _feedback(engine: Runtime, node: ir.Loop, scope: Scope, verdict: Any) -> Any:
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


HANDLER = Handler(KIND, execute)
