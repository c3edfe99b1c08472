"""A graph's verifier: an agent's score against a threshold, an expression over memory, or a
JSON path into memory compared with a value. Its value is {passed, score, reason}."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from temporalio import workflow

from agentrun.lang import expressions, ir
from agentrun.lang.render import to_text
from agentrun.workflows.failures import TaskFailed
from agentrun.workflows.nodes.base import Handler
from agentrun.workflows.nodes.graph_agent import as_task, context, node_row, reply_object
from agentrun.workflows.nodes.json_path import MISSING, JsonPathError, read_path

if TYPE_CHECKING:
    from agentrun.workflows.interpreter import Interpreter
    from agentrun.workflows.scope import Scope

KIND = ir.Verifier


async def execute(engine: Interpreter, node: ir.Verifier, scope: Scope) -> dict[str, Any]:
    if node.mode == "llm_judge":
        if node.target_key:  # the judge is shown the one key it judges
            scope = scope.with_values(input={node.target_key: engine.state.memory.get(node.target_key)})
        verdict = await _judge(engine, node, scope)
    elif node.mode == "expression":
        passed, warning = expressions.condition(
            node.expression, {**engine.values(scope), "memory": engine.state.memory}
        )
        verdict = {"passed": passed, "reason": warning or f"{node.expression} is {str(passed).lower()}"}
    else:
        memory = engine.state.memory
        verdict = _path(node, memory.get(node.target_key) if node.target_key else memory, str(scope.key))
    if node.throw_on_fail and not verdict["passed"]:
        raise TaskFailed(str(scope.key), f"verification failed: {verdict['reason']}")
    return verdict


async def _judge(engine: Interpreter, node: ir.Verifier, scope: Scope) -> dict[str, Any]:
    key = str(scope.key)
    text = "\n\n".join(
        [
            context(engine, node.system, scope),
            f"Judge the work in memory against: {node.prompt or 'the goal'}",
            'Reply with JSON: {"score": <0 to 1>, "reason": "<why>"}.',
        ]
    )
    async with node_row(engine, node, scope) as task:
        task.iterations += 1
        reply = await engine.conversation.ask(as_task(node), scope, text, phase="judge")
        data = reply_object(reply) or {}
        score = data.get("score")
        if isinstance(score, bool) or not isinstance(score, (int, float)):
            raise TaskFailed(key, f"the judge gave no numeric score: {reply.strip()[:200]}")
    passed = score >= node.pass_threshold
    verdict = {"passed": passed, "score": score, "reason": str(data.get("reason") or "")}
    engine.state.finish(key, "completed", workflow.now(), output=to_text(verdict))
    return verdict


def _path(node: ir.Verifier, data: Any, key: str) -> dict[str, Any]:
    """The JSON path read into memory, or into its `target_key` (the state-graph form)."""
    try:
        found = read_path(node.path, data)
    except JsonPathError as exc:
        raise TaskFailed(key, str(exc)) from None
    passed = compare(node.check, found, node.expected)
    shown = "nothing" if found is MISSING else repr(found)
    return {"passed": passed, "reason": f"{node.path} {node.check} {node.expected!r}: found {shown}"}


def compare(check: ir.PathCheck, found: Any, expected: Any) -> bool:
    if found is MISSING:
        return False
    if check == "exists":
        return found is not None
    if check == "equals":
        return found == expected
    if check == "matches":
        return isinstance(found, str) and re.search(str(expected), found) is not None
    try:
        number, limit = float(found), float(expected)
    except (TypeError, ValueError):
        return False
    return {"gt": number > limit, "gte": number >= limit, "lt": number < limit, "lte": number <= limit}[check]


HANDLER = Handler(KIND, execute, own_timeout=True)
