"""The protocol of steps that just reply: any non-empty reply is the output, then the checks its spec asks for
(JSON, a JSON Schema, rules; a rule of no known form is judged by the agent's own model)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jinja2 import TemplateError
from temporalio import workflow

from agentrun.lang import expressions, ir
from agentrun.models import calls
from agentrun.models.texts.plain_text import prompt
from agentrun.workflows import activity_calls, metrics
from agentrun.workflows.conversation import first_line
from agentrun.workflows.failures import TaskFailed

if TYPE_CHECKING:
    from agentrun.models.contract import TaskState
    from agentrun.workflows.runtime import Runtime
    from agentrun.workflows.scope import Scope


class PlainProtocol:
    async def perform(
        self, engine: Runtime, node: ir.Task, scope: Scope, task: TaskState, retry_error: str | None
    ) -> Any:
        """One prompt, a non-empty reply, then the output checks of its spec."""
        key = str(scope.key)
        task.count_iteration()
        try:
            values = engine.values(scope)
            values["input"] = expressions.step_input(node.input, values, engine.all_prior())
            text = prompt(node, values, engine.inp.plan.undefined)
        except (TemplateError, expressions.ExpressionError, TypeError) as exc:
            raise TaskFailed(key, f"cannot fill in its prompt: {exc}") from None
        workflow.set_current_details(f"Running **{node.label}** (agent {node.agent})")
        reply = await engine.conversation.ask(node, scope, text)
        if not reply.strip():
            raise TaskFailed(key, "the agent returned an empty output")
        if node.output_format != "json" and not node.output_schema and not node.rules:
            return reply
        return await _validate(engine, node, scope, reply)


PLAIN = PlainProtocol()


async def _validate(engine: Runtime, node: ir.Task, scope: Scope, reply: str) -> Any:
    key = str(scope.key)
    arg = calls.ValidateCall(
        task_id=key, text=reply, format=node.output_format, json_schema=node.output_schema, rules=node.rules
    )
    result = await activity_calls.perform(
        key, calls.VALIDATE_OUTPUT, arg, calls.ValidateResult, summary=f"{node.label}: validate output", timeout_s=60
    )
    errors = list(result.errors)
    for rule in result.unchecked:
        errors += await _judge(engine, node, scope, rule, reply)
    if errors:
        metrics.failed("validation")
        engine.state.keep_failed_output(key, reply)
        raise TaskFailed(key, "output failed validation: " + "; ".join(errors))
    return result.value


async def _judge(engine: Runtime, node: ir.Task, scope: Scope, rule: str, reply: str) -> list[str]:
    """A rule of no known form is judged by the agent's model; an agent with no model flags it."""
    if not engine.conversation.can_judge(node):
        engine.state.warn(
            f"{scope.key}: rule not checked (no known form, and agent '{node.agent}' has no model to judge it): {rule}"
        )
        return []
    question = (
        "Does the output below satisfy this rule? Answer PASS or FAIL on the first line, then one "
        f"sentence why.\n\nRule: {rule}\n\nOutput:\n{reply}"
    )
    verdict = await engine.conversation.ask(node, scope, question, fresh=True)
    if verdict.strip().upper().startswith("PASS"):
        return []
    return [f"rule judged not met: {rule} ({first_line(verdict)[:200]})"]
