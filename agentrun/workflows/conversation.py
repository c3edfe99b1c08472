"""Asking an agent: the budget check, the prompt sent as an activity, the transcript a chat API
needs, and what the reply cost. How a reply is read is a protocol's business (`workflows.protocols`)."""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError

from agentrun.lang import ir
from agentrun.models import calls
from agentrun.models.contract import RunInput, RunState
from agentrun.models.drivers import driver_of, model_of
from agentrun.models.texts import spawn_text
from agentrun.workflows import activity_calls, metrics, notes, spawning, tracing
from agentrun.workflows.budgets import RESERVATIONS, BudgetExceeded, Budgets, Reservations, cost_usd
from agentrun.workflows.failures import TaskFailed
from agentrun.workflows.scope import Scope


class Conversation:
    def __init__(self, inp: RunInput, state: RunState, budgets: Budgets):
        self.inp, self.state, self.budgets = inp, state, budgets
        self.transcripts: dict[str, list[calls.ChatMessage]] = {}  # by agent id, for chat APIs in reuse mode
        self.turns: dict[str, int] = {}  # prompts each run key has sent
        self.unpriced: set[str] = set()
        self.rolling_back = False  # compensations run whatever the budget says
        self.reservations = Reservations(state)
        self.prices = {**inp.prices, **inp.plan.prices}  # the run's own, then the spec's; fixed for the run

    async def ask(
        self,
        node: ir.Task,
        scope: Scope,
        text: str,
        *,
        fresh: bool = False,
        phase: str | None = None,
        spawn: bool = False,
    ) -> str:
        """Send `text` to the node's agent and return the reply; TaskFailed when it cannot be sent
        (a budget, the agent failing). `fresh` asks outside the agent's conversation; `phase` names
        the step of a protocol in the activity's summary instead of the prompt's first line; `spawn`
        lets a node that may start sub-agents do so, the reply being the one after their results."""
        key = str(scope.key)
        # A person's notes (`say`) ride on the next prompt, whatever language the run is in.
        text = notes.deliver(self.state, key, self.turns.get(key, 0) + 1, text)
        uri = self.inp.agent_uri(node.agent)
        driver = driver_of(uri)
        reuse = self.inp.plan.lifecycle == "reuse" and not fresh
        transcript = self.transcripts.setdefault(node.agent, []) if reuse else []
        offered = spawn and node.spawn
        exchange: list[calls.ChatMessage] = []  # this prompt's tool calls and results, for a chat API
        summary = self._summary(node, scope, text, phase)
        prompt, spawns = text, 0
        while True:
            tools = [calls.SPAWN_AGENTS] if offered and driver.tools else []
            call = self._call(node, key, uri, prompt, [*transcript, *exchange] if driver.chat else [], tools)
            reply = await self.send(node, scope, call, summary, f"agent '{node.agent}'")
            wanted = spawn_text.asks(reply, driver.tools) if offered else []
            if not wanted:
                break
            spawns += len(wanted)
            if spawns > spawning.MAX_CALLS + 1:
                raise TaskFailed(key, f"kept asking for sub-agents after {spawning.MAX_CALLS} spawn requests")
            answers = [await spawning.answer(self, node, scope, a, refuse=spawns > spawning.MAX_CALLS) for a in wanted]
            exchange, prompt = spawning.go_on(exchange, prompt, text, reply, wanted, answers, driver.tools)
            summary = f"{self._summary(node, scope, text, phase)} (after sub-agents)"
        if reuse and driver.chat:
            asked = [calls.ChatMessage(role="user", content=prompt)] if prompt else []
            transcript += [*exchange, *asked, calls.ChatMessage(role="assistant", content=reply.text)]
        return reply.text

    async def send(
        self, node: ir.Task, scope: Scope, call: calls.AgentCall, summary: str, who: str
    ) -> calls.AgentReply:
        """One prompt as an activity, within the node's budgets, its cost counted on the node."""
        key = str(scope.key)
        steps = list(scope.budgets)
        reserving = not self.rolling_back and workflow.patched(RESERVATIONS)
        if reserving:
            await self.reservations.reserve(steps)
        usage, cost = None, 0.0
        try:
            await self._within_budget(key, scope)
            self.state.iteration_count += 1
            with tracing.agent_call(call) as traced:
                reply = await activity_calls.perform(
                    call.task_id,
                    calls.RUN_AGENT,
                    call,
                    calls.AgentReply,
                    summary=summary,
                    timeout_s=call.timeout_s,
                    heartbeat_s=self.inp.heartbeat_s,
                    who=who,
                )
                cost = self._count(key, scope, reply, call.uri)
                usage = reply.usage
                traced.replied(reply, cost)
        finally:
            if reserving:
                self.reservations.settle(steps, usage, cost)
        self._retried(key, node, reply.attempt)
        task = self.state.tasks.get(key)
        if task is not None and reply.worker and task.worker != reply.worker:
            task.worker = reply.worker
        if task is not None and task.first_token_s is None and reply.first_token_s is not None:
            task.first_token_s = reply.first_token_s
        return reply

    def _summary(self, node: ir.Task, scope: Scope, text: str, phase: str | None) -> str:
        """What Temporal Web names the prompt by: the task, its loop round, the protocol's step or the
        prompt's first line (not when the prompt opens with system text, which every task shares)."""
        task = self.state.tasks.get(str(scope.key))
        round_ = scope.values.get("iteration") or (task.iterations if task and node.loop_until else None)
        said = phase is not None and "round" in phase  # a protocol that names its own rounds
        head = f"{node.label} — round {round_}" if round_ and not said else node.label
        what = phase or ("" if node.system else first_line(text))
        return f"{head}: {what}" if what else head

    def _call(
        self, node: ir.Task, key: str, uri: str, prompt: str, transcript: list[calls.ChatMessage], tools: list[str]
    ) -> calls.AgentCall:
        turn = self.turns.get(key, 0)
        self.turns[key] = turn + 1
        info = self.inp.plan.agents.get(node.agent)
        if info is not None and info.system:
            # The agent's own system text (a graph bundle's system_prompt) is never a template:
            # a chat model gets it as the system message, any other agent ahead of the prompt.
            if driver_of(uri).chat:
                transcript = [calls.ChatMessage(role="system", content=info.system), *transcript]
            elif prompt:
                prompt = f"{info.system}\n\n{prompt}"
        return calls.AgentCall(
            run_id=self.state.run_id,
            task_id=key,
            agent_id=node.agent,
            uri=uri,
            prompt=prompt,
            workdir=self.inp.workdir,
            lifecycle=self.inp.plan.lifecycle,
            transcript=list(transcript),
            turn=turn,
            timeout_s=node.timeout_s or calls.DEFAULT_AGENT_TIMEOUT_S,
            tools=tools,
            temperature=info.temperature if info is not None else None,
        )

    def spawn_offer(self, node: ir.Task) -> str:
        """What a node that may start sub-agents is told about it, in its agent's terms; else ''."""
        return spawn_text.offer(driver_of(self.inp.agent_uri(node.agent)).tools) if node.spawn else ""

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
        await self.release_call(arg, f"{node.label}: stop agent")

    async def release_call(self, call: calls.AgentCall, summary: str) -> None:
        """Stop the private agent server a call of refresh mode started; a failure is a warning."""
        try:
            await activity_calls.call(calls.RELEASE_AGENT, call, bool, summary=summary, timeout_s=60)
        except ActivityError as exc:
            self.state.warnings.append(f"{call.task_id}: could not stop its agent: {activity_calls.reason(exc)}")

    async def _within_budget(self, key: str, scope: Scope) -> None:
        if self.rolling_back:
            return
        try:
            await self.budgets.check(list(scope.budgets))
        except BudgetExceeded as exc:
            metrics.failed("budget")
            raise TaskFailed(key, exc.message, retryable=False) from None

    def _count(self, key: str, scope: Scope, reply: calls.AgentReply, uri: str) -> float:
        """Tokens and cost of a reply, by task, model, run and budgeted step; the cost."""
        model = reply.model or model_of(uri)
        cost = cost_usd(self.prices, model, reply.usage)
        if cost is None and (reply.usage.input_tokens or reply.usage.output_tokens) and model not in self.unpriced:
            self.unpriced.add(model)
            if self.prices or self._usd_budget():
                self.state.warnings.append(f"{key}: no price for model '{model}'; its cost is not counted")
        self.state.add_usage(key, reply.usage, model, cost or 0.0, list(scope.budgets))
        return cost or 0.0

    def _retried(self, key: str, node: ir.Task, attempt: int) -> None:
        """Transport retries (a 5xx, a dropped connection) count as retries people see."""
        if attempt <= 1:
            return
        metrics.retried("transport", attempt - 1)
        metrics.failed("transport", attempt - 1)
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
