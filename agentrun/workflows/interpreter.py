"""Walking a Plan: each node through what every node shares (gate, budget, retries, failure
policy, timeout, the values it keeps, its compensation); what a kind does is its handler's
(`workflows.nodes`)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from jinja2 import TemplateError
from temporalio import workflow

from agentrun.lang import ir
from agentrun.lang.render import render
from agentrun.lang.scope import template_values
from agentrun.models.contract import Answer, RunInput, RunState
from agentrun.models.drivers import agent_type
from agentrun.workflows import routing, sizes, taint, tracing
from agentrun.workflows.budgets import Budgets
from agentrun.workflows.continuing import Continuing
from agentrun.workflows.conversation import Conversation
from agentrun.workflows.driven import Driven
from agentrun.workflows.failures import TaskFailed, unexpected
from agentrun.workflows.humans import GateTimedOut, Humans, rejected
from agentrun.workflows.journal import Journal
from agentrun.workflows.nodes import HANDLERS
from agentrun.workflows.nodes.leaf import check_preconditions
from agentrun.workflows.reuse import STEPS, Replayed, Reuse, take_over
from agentrun.workflows.saga import Saga
from agentrun.workflows.scope import RunKey, Scope

# Runs are served here (by a worker, or sandboxed by the replay test): no IR model may
# keep pydantic's deferred placeholder. A command that only reads runs never builds most of them.
ir.build_models()

# Runs recorded before this retried a node whose budget had run out, though no prompt could be sent.
NO_RETRY_PAST_BUDGET = "no-retry-past-budget"


class Interpreter:
    def __init__(
        self,
        inp: RunInput,
        state: RunState,
        skip: set[str],
        humans: Humans,
        saga: Saga,
        budgets: Budgets,
        conversation: Conversation,
        reuse: Reuse,
    ):
        self.inp, self.state, self.skip = inp, state, skip
        self.humans, self.saga, self.budgets, self.conversation = humans, saga, budgets, conversation
        self.reuse = reuse
        self.ran: dict[str, list[str]] = {}  # run key -> the run keys of the nodes it ran, for taint
        self.driven: Driven | None = None  # in a driven run, the agent asks for a tree's steps itself
        self.journal = Journal()
        self.busy = 0  # work nodes and gates under way: a run continues as new only when none is
        self.continuing: Continuing | None = None  # when and how the run continues as new
        self.state_bound = sizes.StateBound()

    async def run(self, node: ir.NodeBase, scope: Scope | None = None, key: RunKey | None = None) -> Any:
        """Run `node` with its gate, retries and failure policy. `key` names this run of it when it
        is not the node's own id (a map element is run as `<map id>[i]`). A node that finished
        before the run continued as new gives what it gave then, and runs nothing."""
        scope = scope or Scope()
        key = key or self.key_of(node, scope)
        path = scope.path_of(key)
        # Undoing runs a compensation once per step it undoes, under one key: never from the journal.
        journaled = not self.conversation.rolling_back
        if journaled and self.journal.has(path):
            return self.journal.get(path)
        work = HANDLERS[node.kind].work
        if work and self.continuing is not None:
            await self.continuing.if_due(self)
        holds = 1 if work or node.gate else 0  # a step or a question to people under way
        self.busy += holds
        try:
            value = await self._run(node, scope, key)
        finally:
            self.busy -= holds
        if journaled:
            self.journal.done(path, value)
        return value

    async def between_rounds(self) -> None:
        """A task that prompts its agent again and again may continue as new between two prompts."""
        if self.continuing is not None:
            await self.continuing.if_due(self, own=1)

    def ran_under(self, owner: str, key: str) -> None:
        """Run key `key` ran under `owner`, whose output carries the taint of what it ran; once, as
        a loop runs its body again and again."""
        ran = self.ran.setdefault(owner, [])
        if key not in ran:
            ran.append(key)

    @tracing.node_spans
    async def _run(self, node: ir.NodeBase, scope: Scope, key: RunKey) -> Any:
        if scope.key is not None:
            self.ran_under(str(scope.key), str(key))
        scope = self._budgeted(node, scope.at(key))
        if not self.journal.resuming(scope.path):  # visited once, however many executions it spans
            self.state.visit(str(key))
        if node.gate and self._asks(node, scope) and not await self._gate(node, scope):
            value, done = self.skipped(node, scope, f"not approved at gate '{node.gate.id}'; skipped"), False
        else:
            value, done = await self._attempts(node, scope)
        self._keep(node, scope, value, done)
        return value

    def key_of(self, node: ir.NodeBase, scope: Scope) -> RunKey:
        """The run key of `node` run under `scope`: its id, in the map elements `scope` is in."""
        return RunKey(node.id, scope.elements)

    def values(self, scope: Scope | None = None, **more: Any) -> dict[str, Any]:
        """What a node's templates see: the run's values, then the node's own (input, item, …)."""
        state = self.state
        run = self._run_values(state.memory, state.steps, state.human)
        return {**run, **(scope.values if scope else {}), **more}

    def trusted_values(self) -> dict[str, Any]:
        """What code a spec writes (a success check) may have spliced into it: the params and the
        built-ins, none of what agents or people wrote (those reach it as data)."""
        return self._run_values({}, {}, {})

    def _run_values(self, memory: dict[str, Any], steps: dict[str, Any], human: dict[str, Any]) -> dict[str, Any]:
        return template_values(
            workdir=self.inp.workdir,
            run_id=self.state.run_id,
            agent_type=agent_type(self.inp.default_agent),
            params=self.inp.params,
            memory=memory,
            steps=steps,
            human=human,
        )

    def all_prior(self) -> dict[str, Any]:
        """Every step's output so far, as "all prior context" gives it."""
        return {step: value["output"] for step, value in self.state.steps.items()}

    def warn(self, scope: Scope, text: str) -> None:
        self.state.warn(f"{scope.key}: {text}")

    def _keep(self, node: ir.NodeBase, scope: Scope, value: Any, done: bool) -> None:
        """Where a node's value goes: steps and memory for later templates; its taint; its undo."""
        key = str(scope.key)
        if done and not HANDLERS[node.kind].work:
            taint.mark_composite(key, self.ran.get(key, []), self.state)
        fields = node.outputs if isinstance(node, ir.Task) and done else []
        self.state.keep(node.id, value, step=node.step, store_as=node.store_as, fields=fields)
        for name in [*([node.store_as] if node.store_as else []), *fields]:
            taint.copy_to(name, key, self.state)
        if done and node.compensation and scope.key is not None:
            self.saga.push(node, scope.key, value)
        self._check_state_size(node, key, value)

    def _check_state_size(self, node: ir.NodeBase, key: str, value: Any) -> None:
        """Fail the node whose value makes the run's state too big to keep, keeping a
        note in its place so the state that reports the failure still fits."""
        if not self.state_bound.may_pass(sizes.value_bytes_bound(value)):
            return
        size = sizes.payload_bytes(self.state.shown())  # the step log is carried apart, by reference
        self.state_bound.measured(size)
        limit = sizes.state_limit(size)
        if limit is None:
            return
        own = sizes.megabytes(sizes.payload_bytes(value))
        self.state.keep(node.id, f"({own} output dropped)", step=node.step, store_as=node.store_as)
        fields = node.outputs if isinstance(node, ir.Task) else []
        self.state.blank(fields)
        message = (
            f"its output ({own}) makes the run's state {sizes.megabytes(size)}, "
            f"over the {sizes.megabytes(limit)} a run may keep"
        )
        self.state.mark_row(key, "failed", message)
        raise TaskFailed(key, message)

    def _budgeted(self, node: ir.NodeBase, scope: Scope) -> Scope:
        """A node with a budget counts what everything under it spends."""
        if node.budget is None:
            return scope
        self.state.budget_step(node.id, node.budget)
        return scope.under_budget(node.id)

    def _asks(self, node: ir.NodeBase, scope: Scope) -> bool:
        """Whether the node's gate is put to people: not for a skipped task, nor again for a task
        that was already past it when the run continued as new, nor for a step whose run a fork
        takes over from its parent (where the gate let it run)."""
        key = str(scope.key)
        taken = isinstance(node, STEPS) and self.reuse.next_is_taken(key)
        return key not in self.skip and not self.journal.has(scope.path + "#gate") and not taken

    async def _gate(self, node: ir.NodeBase, scope: Scope) -> bool:
        """Ask before `node` runs: False when a rejection means skipping it."""
        gate = node.gate
        assert gate is not None
        answer = await self.ask(gate, scope)
        if answer.value != ir.REJECT or gate.on_reject == "continue":
            self.journal.mark(scope.path + "#gate", True)
            return True
        if gate.on_reject == "fail":
            raise TaskFailed(str(scope.key), rejected(gate.id, answer))
        return False

    async def ask(self, gate: ir.Human, scope: Scope, text: str | None = None) -> Answer:
        """Put a gate's question to people; it guards the node `scope` runs. `text` is a question
        the engine wrote itself: it may quote agents, so it is never rendered as a template."""
        if text is None:
            text = self._question(gate, scope)
        try:
            return await self.humans.ask(gate, str(scope.key), text)
        except GateTimedOut as exc:
            raise TaskFailed(str(scope.key), exc.message) from None

    def _question(self, gate: ir.Human, scope: Scope) -> str:
        try:
            return render(gate.prompt, self.values(scope), self.inp.plan.undefined)
        except (TemplateError, TypeError) as exc:
            self.state.warn(f"{gate.id}: its question could not be filled in ({exc}); asked as written")
            return gate.prompt

    async def _attempts(self, node: ir.NodeBase, scope: Scope) -> tuple[Any, bool]:
        """The node's value, and whether it did its work (False when it was skipped)."""
        key = str(scope.key)
        if HANDLERS[node.kind].work and key in self.skip:
            self.state.mark_row(key, "skipped")
            return None, False
        before = routing.mark(self.state)
        for attempt in range(1, node.retry.attempts + 1):
            if attempt > 1:
                self.journal.forget_under(scope.path)  # a retry runs what is inside the node again
            try:
                return await self._once(node, scope), True
            except TaskFailed as exc:
                if attempt == node.retry.attempts or (not exc.retryable and workflow.patched(NO_RETRY_PAST_BUDGET)):
                    return await self._on_failure(node, scope, exc, before)
                await self._backoff(node, scope, attempt, exc)
        return None, True

    async def _once(self, node: ir.NodeBase, scope: Scope) -> Any:
        """One attempt at the node. A step's is recorded in the run's step log, or, in a fork, taken
        over from the parent's record; compensations are neither."""
        if not isinstance(node, STEPS) or self.conversation.rolling_back:
            return await self._dispatch(node, scope)
        turn = self.reuse.begin(str(scope.key), node.id)
        if turn.record is not None:
            return take_over(self.reuse, node, scope, turn)
        self.reuse.going_on(turn.key)
        try:
            value = await self._dispatch(node, scope)
        except TaskFailed as exc:
            self.reuse.ended(turn, "failed", error=exc.message)
            raise
        self.reuse.ended(turn, "completed", value)
        return value

    async def _backoff(self, node: ir.NodeBase, scope: Scope, attempt: int, exc: TaskFailed) -> None:
        # A failure taken over from a fork's parent was waited on there already.
        delay = 0.0 if isinstance(exc, Replayed) else backoff_s(node.retry, attempt + 1)
        self.state.count_retries(str(scope.key), 1)
        self.state.set_last_error(f"{exc.task_id}: {exc.message}")
        self.warn(scope, f"attempt {attempt} failed ({exc.message}); retrying in {delay:g}s")
        tracing.retrying(str(scope.key), attempt, delay, exc.message)
        if not delay:
            return
        self.state.backing_off(+1)
        try:
            await workflow.sleep(timedelta(seconds=delay), summary=f"{node.label}: backoff")
        finally:
            self.state.backing_off(-1)

    async def _on_failure(
        self, node: ir.NodeBase, scope: Scope, exc: TaskFailed, before: routing.Mark
    ) -> tuple[Any, bool]:
        """The node's failure policy; a failure it skips or falls back from is a warning, not an error."""
        if node.on_failure == "skip":
            routing.not_taken(self.state, before)
            return self.skipped(node, scope, f"failed and skipped: {exc.message}"), False
        if node.on_failure == "fallback" and node.fallback:
            routing.not_taken(self.state, before)
            self.warn(scope, f"failed ({exc.message}); falling back to {node.fallback.label}")
            try:
                return await self.run(node.fallback, scope), True
            except TaskFailed as again:
                message = f"its fallback {node.fallback.id} failed too: {again.message}"
                raise TaskFailed(str(scope.key), message) from None
        raise exc

    def skipped(self, node: ir.NodeBase, scope: Scope, why: str) -> None:
        """The skip policy: a warning, the row marked skipped, and a null output."""
        self.warn(scope, why)
        self.state.mark_row(str(scope.key), "skipped")
        return None

    async def _dispatch(self, node: ir.NodeBase, scope: Scope) -> Any:
        handler = HANDLERS.get(node.kind)
        if handler is None:
            raise TaskFailed(str(scope.key), f"{node.kind} nodes cannot run in this engine")
        if node.preconditions and not handler.work:  # a leaf checks its own, within its row
            await check_preconditions(self, node, scope)
        try:
            if node.timeout_s is None or handler.own_timeout:
                return await handler.execute(self, node, scope)
            return await asyncio.wait_for(handler.execute(self, node, scope), node.timeout_s)
        except TimeoutError:
            raise TaskFailed(str(scope.key), f"step timed out after {node.timeout_s:g}s") from None
        except (TaskFailed, asyncio.CancelledError):
            raise
        except Exception as exc:
            # A template or expression that cannot be filled in (range(10**9), "a" * 10**10) fails this
            # node with its reason: raised further it would fail the workflow task on every retry
            # and leave the run spinning.
            raise TaskFailed(str(scope.key), unexpected(exc)) from None


def backoff_s(retry: ir.Retry, attempt: int) -> float:
    """The wait before `attempt` (2, 3, …), as `retry.counts` says (spec.ir.Retry)."""
    n = attempt if retry.counts == "attempts" else attempt - 1
    if retry.backoff == "linear":
        wait = retry.delay_s * n
    elif retry.backoff == "exponential":
        wait = retry.delay_s * (2 ** (n if retry.counts == "attempts" else n - 1))
    else:
        wait = retry.delay_s
    return wait if retry.max_delay_s is None else min(wait, retry.max_delay_s)
