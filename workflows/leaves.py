"""Running the leaves of a Plan: agent tasks (loops, nudges, success criteria) and provider calls."""

from __future__ import annotations

import asyncio
from typing import Any

from jinja2 import TemplateError
from temporalio import workflow
from temporalio.exceptions import ActivityError, CancelledError

from spec import calls, expressions, ir
from spec.render import render, render_value, to_text
from workflows import activity_calls, completion, prompt, taint
from workflows.budgets import BudgetExceeded, Budgets, cost_usd
from workflows.inputs import DEFAULT_MAX_ITERATIONS, RunInput
from workflows.state import RunState, TaskState

# The scope key listing the budgeted steps a node runs under, innermost last.
BUDGETS = "_budgets"


class TaskFailed(Exception):
    def __init__(self, task_id: str, message: str):
        super().__init__(f"{task_id}: {message}")
        self.task_id, self.message = task_id, message


class Leaves:
    def __init__(self, inp: RunInput, state: RunState, budgets: Budgets):
        self.inp, self.state, self.budgets = inp, state, budgets
        self.transcripts: dict[str, list[calls.ChatMessage]] = {}
        self.turns: dict[str, int] = {}
        self.budget_steps: dict[str, list[str]] = {}
        self.unpriced: set[str] = set()
        self.rolling_back = False  # compensations run whatever the budget says
        builtins = {
            "agent_type": agent_type(inp.default_agent),
            "skip_permissions": False,
            "workdir": inp.workdir,
            "run_id": state.run_id,
            "iteration": 1,
        }
        self._context = {**builtins, **inp.params, "inputs": inp.params}

    def context(self, **extra: Any) -> dict[str, Any]:
        """What templates see: built-ins, params (bare and as `inputs`), step values and stored
        names, then per-prompt values such as iteration, input or item."""
        own = {key: value for key, value in extra.items() if not key.startswith("_")}
        return {**self._context, **self.state.memory, "steps": self.state.steps, "human": self.state.human, **own}

    async def run(self, node: ir.Task | ir.Provider, scope: dict[str, Any] | None = None) -> Any:
        task = self.state.begin(node.id, workflow.now())
        self.budget_steps[node.id] = list((scope or {}).get(BUDGETS, []))
        workflow.set_current_details(f"Running **{node.label}** ({node.kind})")
        cancelled = False
        try:
            if node.preconditions:
                await self._preconditions(node)
            if isinstance(node, ir.Provider):
                output = await self._provider(node, task, scope or {})
            elif node.protocol == "plain":
                output = await self._plain(node, task, scope or {})
            else:
                output = await self._task(node, task, scope or {})
        except TaskFailed as exc:
            self.state.finish(node.id, "failed", workflow.now(), error=exc.message)
            raise
        except asyncio.CancelledError:
            cancelled = True  # the driver stops a cancelled task's agent itself
            self.state.finish(node.id, "cancelled", workflow.now(), error="cancelled")
            raise
        finally:
            if not cancelled and isinstance(node, ir.Task) and self._refreshed(node):
                await self._release(node)
        self.state.finish(node.id, "completed", workflow.now(), output=to_text(output))
        taint.mark_leaf(node, self.state, scope or {})
        return output

    def _refreshed(self, node: ir.Task) -> bool:
        return self.inp.plan.lifecycle == "refresh" and self.inp.agent_uri(node.agent).startswith("agentapi:")

    async def _release(self, node: ir.Task) -> None:
        """The task is over: stop the agent server that refresh mode started for it."""
        arg = calls.AgentCall(
            run_id=self.state.run_id,
            task_id=node.id,
            agent_id=node.agent,
            uri=self.inp.agent_uri(node.agent),
            prompt="",
            workdir=self.inp.workdir,
            lifecycle="refresh",
        )
        try:
            await activity_calls.call(calls.RELEASE_AGENT, arg, bool, summary=f"{node.label}: stop agent", timeout_s=60)
        except ActivityError as exc:
            self.state.warnings.append(f"{node.id}: could not stop its agent: {activity_calls.reason(exc)}")

    async def _preconditions(self, node: ir.Task | ir.Provider) -> None:
        pre = node.preconditions
        arg = calls.PreconditionCall(
            task_id=node.id,
            workdir=self.inp.workdir,
            spec_dir=self.inp.plan.spec_dir,
            files_exist=pre.files_exist,
            min_count=pre.min_count,
            sync_targets=pre.sync_targets,
        )
        result = await self._activity(
            node, calls.CHECK_PRECONDITIONS, arg, calls.CheckResult, f"{node.label}: preconditions", 300
        )
        if not result.ok:
            raise TaskFailed(node.id, f"precondition failed: {result.error}")

    async def _provider(self, node: ir.Provider, task: TaskState, scope: dict[str, Any]) -> str:
        task.attempts = 1
        params = render_value(node.call.params, self.context(**scope))
        arg = calls.ProviderCall(
            task_id=node.id,
            workdir=self.inp.workdir,
            provider=node.call.provider,
            method=node.call.method,
            params=params,
            output_file=node.call.output_file,
        )
        result = await self._activity(
            node,
            calls.CALL_PROVIDER,
            arg,
            calls.ProviderResult,
            f"{node.label}: {node.call.provider}.{node.call.method}",
            node.timeout_s or 600,
        )
        return result.text

    async def _task(self, node: ir.Task, task: TaskState, scope: dict[str, Any]) -> str:
        task.agent = node.agent
        retries = node.criteria.max_retries if node.criteria else 0
        error: str | None = None
        for attempt in range(1, retries + 2):
            task.attempts = attempt
            reply = await self._loop(node, task, error, scope)
            if not node.criteria:
                return reply
            check = await self._criteria(node)
            if check.ok:
                return reply
            error = check.error
            self.state.warnings.append(f"{node.id}: success criteria failed (attempt {attempt}): {error}")
        raise TaskFailed(node.id, f"success criteria failed after {retries + 1} attempt(s): {error}")

    async def _loop(self, node: ir.Task, task: TaskState, retry_error: str | None, scope: dict[str, Any]) -> str:
        limit = (
            (node.loop_until.max_iterations if node.loop_until else None)
            or self.inp.max_iterations
            or DEFAULT_MAX_ITERATIONS
        )
        iteration = 0
        while True:
            iteration += 1
            task.iterations += 1
            workflow.set_current_details(f"Running **{node.label}**: attempt {task.attempts}, iteration {iteration}")
            text = prompt.build(
                node, self.context(**scope, iteration=iteration), retry_error if iteration == 1 else None
            )
            reply = await self._reply_with_status(node, text)
            if not node.loop_until or completion.loop_done(reply, node.loop_until.status):
                return reply
            if iteration >= limit:
                self.state.warnings.append(
                    f"{node.id}: stopped after {limit} iterations without status {node.loop_until.status}"
                )
                return reply

    async def _reply_with_status(self, node: ir.Task, text: str) -> str:
        """Send a prompt; an ERROR status fails the task; no status gets one nudge (strict mode)."""
        reply = await self._ask(node, text)
        status = completion.status_of(reply)
        if status is None and not self._lenient() and not _loop_ended(node, reply):
            reply = await self._ask(node, completion.nudge(node))
            status = completion.status_of(reply)
            if status is None and not _loop_ended(node, reply):
                raise TaskFailed(node.id, "the agent stopped without a completion status, even after a reminder")
        if status == "ERROR":
            raise TaskFailed(node.id, "the agent reported COMPLETION_STATUS: ERROR: " + _tail(reply))
        return reply

    def _lenient(self) -> bool:
        return self.inp.lenient or self.inp.plan.completion == "lenient"

    async def _ask(self, node: ir.Task, text: str, fresh: bool = False) -> str:
        uri = self.inp.agent_uri(node.agent)
        reuse = self.inp.plan.lifecycle == "reuse" and not fresh
        transcript = self.transcripts.setdefault(node.agent, []) if reuse else []
        turn = self.turns.get(node.id, 0)
        self.turns[node.id] = turn + 1
        arg = calls.AgentCall(
            run_id=self.state.run_id,
            task_id=node.id,
            agent_id=node.agent,
            uri=uri,
            prompt=text,
            workdir=self.inp.workdir,
            lifecycle=self.inp.plan.lifecycle,
            transcript=list(transcript) if _is_stateless(uri) else [],
            turn=turn,
            timeout_s=node.timeout_s or 1800,
        )
        await self._within_budget(node)
        self.state.iteration_count += 1
        reply = await self._activity(
            node,
            calls.RUN_AGENT,
            arg,
            calls.AgentReply,
            f"{node.label}: {_first_line(text)}",
            node.timeout_s or 1800,
            heartbeat=True,
        )
        self._count(node, reply, uri)
        if reuse and _is_stateless(uri):
            transcript += [
                calls.ChatMessage(role="user", content=text),
                calls.ChatMessage(role="assistant", content=reply.text),
            ]
        return reply.text

    async def _within_budget(self, node: ir.Task) -> None:
        if self.rolling_back:
            return
        try:
            await self.budgets.check(self.budget_steps.get(node.id, []))
        except BudgetExceeded as exc:
            raise TaskFailed(node.id, exc.message) from None

    def _count(self, node: ir.Task, reply: calls.AgentReply, uri: str) -> None:
        """Tokens and cost of a reply, by task, model, run and budgeted step."""
        model = reply.model or uri.partition(":")[2]
        prices = {**self.inp.prices, **self.inp.plan.prices}
        cost = cost_usd(prices, model, reply.usage)
        if cost is None and (reply.usage.input_tokens or reply.usage.output_tokens) and model not in self.unpriced:
            self.unpriced.add(model)
            if prices or self._usd_budget():
                self.state.warnings.append(f"{node.id}: no price for model '{model}'; its cost is not counted")
        self.state.add_usage(node.id, reply.usage, model, cost or 0.0, self.budget_steps.get(node.id, []))

    def _usd_budget(self) -> bool:
        budgets = [self.state.budget, *self.state.step_budgets.values()]
        return any(b is not None and b.usd is not None for b in budgets)

    async def _plain(self, node: ir.Task, task: TaskState, scope: dict[str, Any]) -> Any:
        """A pipeline agent: one prompt, a non-empty reply, then the output checks of its spec."""
        task.agent, task.attempts = node.agent, 1
        task.iterations += 1
        try:
            context = self.context(**scope)
            context["input"] = self._input(node, context)
            text = prompt.build_plain(node, context)
        except (TemplateError, expressions.ExpressionError, TypeError) as exc:
            raise TaskFailed(node.id, f"cannot fill in its prompt: {exc}") from None
        workflow.set_current_details(f"Running **{node.label}** (agent {node.agent})")
        reply = await self._ask(node, text)
        if not reply.strip():
            raise TaskFailed(node.id, "the agent returned an empty output")
        if node.output_format != "json" and not node.output_schema and not node.rules:
            return reply
        return await self._validate(node, reply)

    def _input(self, node: ir.Task, context: dict[str, Any]) -> Any:
        if node.input is None:
            return context.get("input")
        if node.input == ir.ALL_PRIOR:
            return {step: value["output"] for step, value in self.state.steps.items()}
        if expressions.is_reference(node.input):
            return expressions.resolve(node.input, context)
        return render(node.input, context)

    async def _validate(self, node: ir.Task, reply: str) -> Any:
        arg = calls.ValidateCall(
            task_id=node.id, text=reply, format=node.output_format, json_schema=node.output_schema, rules=node.rules
        )
        result = await self._activity(
            node, calls.VALIDATE_OUTPUT, arg, calls.ValidateResult, f"{node.label}: validate output", 60
        )
        errors = list(result.errors)
        for rule in result.unchecked:
            errors += await self._judge(node, rule, reply)
        if errors:
            raise TaskFailed(node.id, "output failed validation: " + "; ".join(errors))
        return result.value

    async def _judge(self, node: ir.Task, rule: str, reply: str) -> list[str]:
        """A rule of no known form is judged by the agent's model; an agent with no model flags it."""
        if not _is_stateless(self.inp.agent_uri(node.agent)):
            self.state.warnings.append(
                f"{node.id}: rule not checked (no known form, and agent '{node.agent}' "
                f"has no model to judge it): {rule}"
            )
            return []
        verdict = await self._ask(node, prompt.judge(rule, reply), fresh=True)
        if verdict.strip().upper().startswith("PASS"):
            return []
        return [f"rule judged not met: {rule} ({_first_line(verdict)[:200]})"]

    async def _criteria(self, node: ir.Task) -> calls.CheckResult:
        crit = node.criteria
        code = render_value(crit.python, self.context()) if crit.python else None
        arg = calls.CriteriaCall(
            task_id=node.id,
            workdir=self.inp.workdir,
            spec_dir=self.inp.plan.spec_dir,
            python=code,
            script=crit.script,
            timeout_s=crit.timeout_s,
        )
        return await self._activity(
            node,
            calls.CHECK_CRITERIA,
            arg,
            calls.CheckResult,
            f"{node.label}: success criteria",
            crit.timeout_s + 30,
            heartbeat=True,
        )

    async def _activity(
        self,
        node: ir.NodeBase,
        name: str,
        arg: Any,
        result_type: type,
        summary: str,
        timeout_s: float,
        heartbeat: bool = False,
    ) -> Any:
        try:
            return await activity_calls.call(
                name,
                arg,
                result_type,
                summary=summary,
                timeout_s=timeout_s,
                heartbeat_s=self.inp.heartbeat_s if heartbeat else None,
            )
        except ActivityError as exc:
            if isinstance(exc.cause, CancelledError):
                raise asyncio.CancelledError() from None  # the run or this branch was cancelled
            raise TaskFailed(node.id, activity_calls.reason(exc)) from None


def _loop_ended(node: ir.Task, reply: str) -> bool:
    return node.loop_until is not None and completion.loop_done(reply, node.loop_until.status)


def _is_stateless(uri: str) -> bool:
    return uri.split(":", 1)[0] in ("openai", "anthropic")


def agent_type(uri: str) -> str:
    scheme, _, rest = uri.partition(":")
    if scheme == "agentapi" and "type=" in rest:
        return rest.split("type=", 1)[1].split("&", 1)[0]
    return scheme


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")[:120]


def _tail(text: str, size: int = 300) -> str:
    return text.strip()[-size:]
