"""Asking an agent: the budget check, the prompt sent as an activity, the transcript a chat API
needs, and what the reply cost. How a reply is read is a protocol's business (`workflows.protocols`)."""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError

from agentrun.lang import coding_tools, ir
from agentrun.models import calls
from agentrun.models.contract import RunInput, RunState
from agentrun.models.drivers import driver_of, model_of
from agentrun.models.texts import spawn_text
from agentrun.workflows import activity_calls, metrics, notes, spawning, tool_loop, tracing
from agentrun.workflows.budgets import RESERVATIONS, BudgetExceeded, Budgets, Reservations, cost_usd
from agentrun.workflows.failures import TaskFailed
from agentrun.workflows.humans import Humans
from agentrun.workflows.mcp_tools import McpTools
from agentrun.workflows.scope import Scope
from agentrun.workflows.threads import Threads

# Runs recorded before this named a map's elements by the map's worker node (`answer` three times)
# and labelled each state-graph step with the goal line that every one of them opens with.
SUMMARIES_NAME_ELEMENTS = "summaries-name-elements"


def goal_line(goal: str) -> str:
    """The line a state-graph step's prompt opens with (the dialect's template and graph agents)."""
    return f"Goal: {goal}"


class Conversation:
    def __init__(self, inp: RunInput, state: RunState, budgets: Budgets):
        self.inp, self.state, self.budgets = inp, state, budgets
        self.transcripts: dict[str, list[calls.ChatMessage]] = {}  # by agent id, for chat APIs in reuse mode
        self.turns: dict[str, int] = {}  # prompts each run key has sent
        self.unpriced: set[str] = set()
        self.rolling_back = False  # compensations run whatever the budget says
        self.reservations = Reservations(state)
        self.prices = {**inp.prices, **inp.plan.prices}  # the run's own, then the spec's; fixed for the run
        self.tool_policy = tool_loop.policy_of(inp.plan, inp.steering_files)
        self.tool_calls_made: dict[str, int] = {}  # by run key, against its max_tool_calls
        self.humans: Humans | None = None  # who approves a tool call the policy's `ask` takes (AgentRun's)
        # The run's MCP servers (agentrun.yaml's, then the spec's own), each listed once.
        self.mcp = McpTools({**inp.mcp_servers, **inp.plan.mcp_servers})
        self.saved: dict[str, dict[str, Any]] = {}  # by run key: what save_to_memory calls captured
        self.threads = Threads()  # each step's conversations, sent to the model by reference

    async def ask(
        self,
        node: ir.Task,
        scope: Scope,
        text: str,
        *,
        fresh: bool = False,
        phase: str | None = None,
        spawn: bool = False,
        act: bool = True,
    ) -> str:
        """Send `text` to the node's agent and return the reply; TaskFailed when it cannot be sent
        (a budget, the agent failing). `fresh` asks outside the agent's conversation; `phase` names
        the step of a protocol in the activity's summary instead of the prompt's first line; `spawn`
        lets a node that may start sub-agents do so, the reply being the one after their results.
        `act` offers the tools its spec grants (a prompt for the work; not one for a plan or a
        verdict, nor a fresh question)."""
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
        box = self._toolbox(node, scope, driver.tools) if act and not fresh else None
        granted = await box.offer() if box is not None else []
        while True:
            tools = [calls.SPAWN_AGENTS] if offered and driver.tools else []
            call = self._call(node, key, uri, prompt, [*transcript, *exchange] if driver.chat else [], tools)
            call.offered = granted
            reply = await self.send(node, scope, call, summary, f"agent '{node.agent}'")
            calling = [c for c in reply.tool_calls if c.name != calls.SPAWN_AGENTS] if box is not None else []
            if calling:
                # The model's turn with its calls, then their results; it goes on from them (no new prompt).
                said = [calls.ChatMessage(role="user", content=prompt)] if prompt else []
                turn = calls.ChatMessage(role="assistant", content=reply.text, tool_calls=reply.tool_calls)
                spawned = [c for c in reply.tool_calls if c.name == calls.SPAWN_AGENTS]
                answers = await box.answer(calling, reply.text) if box is not None else []
                answers += [_not_now(c) for c in spawned]  # each call is answered; a spawn waits for a reply of its own
                exchange, prompt = [*exchange, *said, turn, *_in_order(reply.tool_calls, answers)], ""
                summary = f"{self._summary(node, scope, text, phase)} (after {calling[-1].name})"
                continue
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
            self.state.count_prompt()
            with tracing.agent_call(call) as traced:
                sent, delivered = self.threads.outgoing(key, call)
                reply = await activity_calls.perform(
                    call.task_id,
                    calls.RUN_AGENT,
                    sent,
                    calls.AgentReply,
                    summary=summary,
                    timeout_s=call.timeout_s,
                    heartbeat_s=self.inp.heartbeat_s,
                    who=who,
                )
                delivered(reply)
                if reply.cut:
                    self.state.cut_to_fit(key, reply.cut)
                cost = self._count(key, scope, reply, call.uri)
                usage = reply.usage
                traced.replied(reply, cost)
        finally:
            if reserving:
                self.reservations.settle(steps, usage, cost)
        self._retried(key, node, reply.attempt)
        self.state.heard_from(key, reply.worker, reply.first_token_s)
        return reply

    def _toolbox(self, node: ir.Task, scope: Scope, takes_tools: bool) -> tool_loop.Toolbox | None:
        """The tools the node's spec grants its agent, for a model that takes function tools;
        None for any other agent, a node granted none, or a run recorded before tools."""
        if node.grant is None or not takes_tools or not workflow.patched(tool_loop.TOOL_LOOP):
            return None
        return tool_loop.Toolbox(self, node, scope, node.grant)

    def _summary(self, node: ir.Task, scope: Scope, text: str, phase: str | None) -> str:
        """What Temporal Web names the prompt by: the task, its loop round, the protocol's step or the
        prompt's first line (not when the prompt opens with system text, which every task shares)."""
        task = self.state.tasks.get(str(scope.key))
        round_ = scope.values.get("iteration") or (task.iterations if task and node.loop_until else None)
        said = phase is not None and "round" in phase  # a protocol that names its own rounds
        name, shared = node.label, bool(node.system)
        # Asked only where the names differ, so a run with neither a map nor a goal line gets no marker.
        element, goal = _element_name(node, scope), self._opens_with_goal(text)
        if (element or goal) and workflow.patched(SUMMARIES_NAME_ELEMENTS):
            name, shared = element or name, shared or goal
        head = f"{name} — round {round_}" if round_ and not said else name
        what = phase or ("" if shared else first_line(text))
        return f"{head}: {what}" if what else head

    def _opens_with_goal(self, text: str) -> bool:
        """Whether the prompt opens with the run's goal line, which every step of a state graph shares."""
        goal = self.inp.params.get("goal") or self.inp.plan.goal
        return text.split("\n", 1)[0] == goal_line(goal)

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
            max_context_tokens=info.max_context_tokens if info is not None else None,
            # An agent that takes no function tools acts with its own; it is told which it may use.
            allowed_tools=[] if driver_of(uri).tools else coding_tools.claude_code(node.grant),
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
            self.state.warn(f"{call.task_id}: could not stop its agent: {activity_calls.reason(exc)}")

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
                self.state.warn(f"{key}: no price for model '{model}'; its cost is not counted")
        self.state.add_usage(key, reply.usage, model, cost or 0.0, list(scope.budgets))
        return cost or 0.0

    def _retried(self, key: str, node: ir.Task, attempt: int) -> None:
        """Transport retries (a 5xx, a dropped connection) count as retries people see."""
        if attempt <= 1:
            return
        metrics.retried("transport", attempt - 1)
        metrics.failed("transport", attempt - 1)
        self.state.count_retries(key, attempt - 1)
        self.state.warn(f"{key}: agent '{node.agent}' answered on attempt {attempt} (transport errors before)")

    def _usd_budget(self) -> bool:
        budgets = [self.state.budget, *self.state.step_budgets.values()]
        return any(b is not None and b.usd is not None for b in budgets)


def _element_name(node: ir.Task, scope: Scope) -> str:
    """A map element's name as `status` and the report give it (`research[2]`), though the node it
    runs is the map's worker node (`answer`); '' outside maps."""
    key = scope.key
    if key is None or not key.elements:
        return ""
    return key.text if key.node != node.id else node.label + key.text.removeprefix(key.node)


def _not_now(call: calls.ToolCall) -> calls.ChatMessage:
    why = f"error: call {calls.SPAWN_AGENTS} in a reply of its own, without other tool calls beside it"
    return calls.ChatMessage(role="tool", content=why, tool_call_id=call.id)


def _in_order(asked: list[calls.ToolCall], answers: list[calls.ChatMessage]) -> list[calls.ChatMessage]:
    """The tool results in the order the model made the calls, as the chat APIs want them."""
    by_id = {a.tool_call_id: a for a in answers}
    return [by_id[c.id] for c in asked if c.id in by_id]


def first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")[:120]
