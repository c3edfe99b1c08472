"""A graph's verifier: an agent's score against a threshold, an expression over memory, or a
JSON path into memory compared with a value. Its value is cycgraph's VerificationResult: {type,
passed, reasoning, evaluated_at}, with score and threshold from a judge, extracted_value from a path."""

from __future__ import annotations

import json
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
    from agentrun.workflows.runtime import Runtime
    from agentrun.workflows.scope import Scope

KIND = ir.Verifier


async def execute(engine: Runtime, node: ir.Verifier, scope: Scope) -> dict[str, Any]:
    if node.mode == "llm_judge":
        if node.target_key:  # the judge is shown the one key it judges
            scope = scope.with_values(input={node.target_key: engine.state.memory.get(node.target_key)})
        verdict = await _judge(engine, node, scope)
    elif node.mode == "expression":
        passed, warning = expressions.condition(
            node.expression, {**engine.values(scope), "memory": engine.state.memory}
        )
        said = f'expression "{node.expression}" evaluated {"truthy" if passed else "falsy"}'
        verdict = _verdict("expression", passed, warning or said)
    else:
        memory = engine.state.memory
        verdict = _path(node, memory.get(node.target_key) if node.target_key else memory, str(scope.key))
    if node.throw_on_fail and not verdict["passed"]:
        raise TaskFailed(str(scope.key), f"verification failed: {verdict['reasoning']}")
    return verdict


async def _judge(engine: Runtime, node: ir.Verifier, scope: Scope) -> dict[str, Any]:
    key = str(scope.key)
    text = "\n\n".join(
        [
            context(engine, node.system, scope),
            f"Judge the work in memory against: {node.prompt or 'the goal'}",
            'Reply with JSON: {"score": <0 to 1>, "reasoning": "<why>"}.',
        ]
    )
    async with node_row(engine, node, scope) as task:
        task.count_iteration()
        reply = await engine.conversation.ask(as_task(node), scope, text, phase="judge")
        data = reply_object(reply) or {}
        score = data.get("score")
        if isinstance(score, bool) or not isinstance(score, (int, float)):
            raise TaskFailed(key, f"the judge gave no numeric score: {reply.strip()[:200]}")
    passed = score >= node.pass_threshold
    why = str(data.get("reasoning") or data.get("reason") or "")
    verdict = _verdict("llm_judge", passed, why, score=score, threshold=node.pass_threshold)
    engine.state.finish(key, "completed", workflow.now(), output=to_text(verdict))
    return verdict


def _path(node: ir.Verifier, data: Any, key: str) -> dict[str, Any]:
    """The JSON path read into memory, or into its `target_key` (the state-graph form)."""
    try:
        found = read_path(node.path, data)
    except JsonPathError as exc:
        raise TaskFailed(key, str(exc)) from None
    passed = compare(node.check, found, node.expected)
    value = None if found is MISSING else found
    said = f"assertion {_assertion(node)} at {node.path} " + ("passed" if passed else f"failed (value={_js(value)})")
    return _verdict("jsonpath", passed, said, extracted_value=value)


def _verdict(mode: str, passed: bool, reasoning: str, **extra: Any) -> dict[str, Any]:
    """cycgraph's VerificationResult, its reasoning worded as there, its time the workflow's."""
    at = workflow.now().isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return {"type": mode, "passed": passed, "reasoning": reasoning, **extra, "evaluated_at": at}


def _assertion(node: ir.Verifier) -> str:
    symbol = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}.get(node.check)
    if symbol:
        return f"{symbol} {_js(node.expected)}"
    if node.check == "matches":
        return f"matches /{node.expected}/"
    return "exists" if node.check == "exists" else f"equals {_js(node.expected)}"


def _js(value: Any) -> str:
    """A value as JSON.stringify writes it (compact), as cycgraph's reasoning shows it."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


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
