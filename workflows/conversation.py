"""Asking an agent: the budget check, the prompt sent as an activity, the transcript a chat API
needs, and what the reply cost. How a reply is read is a protocol's business (`workflows.protocols`)."""

from __future__ import annotations

from temporalio.exceptions import ActivityError

from spec import calls, ir
from spec.drivers import driver_of, model_of
from workflows import activity_calls
from workflows.budgets import BudgetExceeded, Budgets, cost_usd
from workflows.contract import RunInput, RunState
from workflows.failures import TaskFailed
from workflows.scope import Scope

DEFAULT_TIMEOUT_S = 1800


class Conversation:
    def __init__(self, inp: RunInput, state: RunState, budgets: Budgets):
        self.inp, self.state, self.budgets = inp, state, budgets
        self.transcripts: dict[str, list[calls.ChatMessage]] = {}  # by agent id, for chat APIs in reuse mode
        self.turns: dict[str, int] = {}  # prompts each run key has sent
        self.unpriced: set[str] = set()
        self.rolling_back = False  # compensations run whatever the budget says

    async def ask(
        self, node: ir.Task, scope: Scope, text: str, *, fresh: bool = False, phase: str | None = None
    ) -> str:
        """Send `text` to the node's agent and return the reply; TaskFailed when it cannot be sent
        (a budget, the agent failing). `fresh` asks outside the agent's conversation; `phase` names
        the step of a protocol in the activity's summary instead of the prompt's first line."""
        key = str(scope.key)
        uri = self.inp.agent_uri(node.agent)
        chat = driver_of(uri).chat
        reuse = self.inp.plan.lifecycle == "reuse" and not fresh
        transcript = self.transcripts.setdefault(node.agent, []) if reuse else []
        turn = self.turns.get(key, 0)
        self.turns[key] = turn + 1
        arg = calls.AgentCall(
            run_id=self.state.run_id,
            task_id=key,
            agent_id=node.agent,
            uri=uri,
            prompt=text,
            workdir=self.inp.workdir,
            lifecycle=self.inp.plan.lifecycle,
            transcript=list(transcript) if chat else [],
            turn=turn,
            timeout_s=node.timeout_s or DEFAULT_TIMEOUT_S,
        )
        await self._within_budget(key, scope)
        self.state.iteration_count += 1
        reply = await activity_calls.perform(
            key,
            calls.RUN_AGENT,
            arg,
            calls.AgentReply,
            summary=f"{node.label}: {phase or first_line(text)}",
            timeout_s=node.timeout_s or DEFAULT_TIMEOUT_S,
            heartbeat_s=self.inp.heartbeat_s,
            who=f"agent '{node.agent}'",
        )
        self._count(key, scope, reply, uri)
        self._retried(key, node, reply.attempt)
        if reuse and chat:
            transcript += [
                calls.ChatMessage(role="user", content=text),
                calls.ChatMessage(role="assistant", content=reply.text),
            ]
        return reply.text

    def can_judge(self, node: ir.Task) -> bool:
        """Whether the node's agent is a model that can judge a rule of no known form."""
        return driver_of(self.inp.agent_uri(node.agent)).chat

    def restarts(self, node: ir.Task) -> bool:
        """Whether the node's agent was started for it alone (refresh mode) and is stopped after it."""
        return self.inp.plan.lifecycle == "refresh" and driver_of(self.inp.agent_uri(node.agent)).restarts

    async def release(self, node: ir.Task, scope: Scope) -> None:
        """The task is over: stop the agent server that refresh mode started for it."""
        arg = calls.AgentCall(
            run_id=self.state.run_id,
            task_id=str(scope.key),
            agent_id=node.agent,
            uri=self.inp.agent_uri(node.agent),
            prompt="",
            workdir=self.inp.workdir,
            lifecycle="refresh",
        )
        try:
            await activity_calls.call(calls.RELEASE_AGENT, arg, bool, summary=f"{node.label}: stop agent", timeout_s=60)
        except ActivityError as exc:
            self.state.warnings.append(f"{scope.key}: could not stop its agent: {activity_calls.reason(exc)}")

    async def _within_budget(self, key: str, scope: Scope) -> None:
        if self.rolling_back:
            return
        try:
            await self.budgets.check(list(scope.budgets))
        except BudgetExceeded as exc:
            raise TaskFailed(key, exc.message) from None

    def _count(self, key: str, scope: Scope, reply: calls.AgentReply, uri: str) -> None:
        """Tokens and cost of a reply, by task, model, run and budgeted step."""
        model = reply.model or model_of(uri)
        prices = {**self.inp.prices, **self.inp.plan.prices}
        cost = cost_usd(prices, model, reply.usage)
        if cost is None and (reply.usage.input_tokens or reply.usage.output_tokens) and model not in self.unpriced:
            self.unpriced.add(model)
            if prices or self._usd_budget():
                self.state.warnings.append(f"{key}: no price for model '{model}'; its cost is not counted")
        self.state.add_usage(key, reply.usage, model, cost or 0.0, list(scope.budgets))

    def _retried(self, key: str, node: ir.Task, attempt: int) -> None:
        """Transport retries (a 5xx, a dropped connection) count as retries people see."""
        if attempt <= 1:
            return
        self.state.retry_count += attempt - 1
        task = self.state.tasks.get(key)
        if task is not None:
            task.retries += attempt - 1
        self.state.warnings.append(
            f"{key}: agent '{node.agent}' answered on attempt {attempt} (transport errors before)"
        )

    def _usd_budget(self) -> bool:
        budgets = [self.state.budget, *self.state.step_budgets.values()]
        return any(b is not None and b.usd is not None for b in budgets)


def first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")[:120]
