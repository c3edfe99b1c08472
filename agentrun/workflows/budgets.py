"""Budgets: what a reply cost, and whether the run or a step may send its next prompt."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from temporalio import workflow

from agentrun.ids import GateId
from agentrun.lang import ir
from agentrun.models.calls import Usage
from agentrun.models.contract import RUN_BUDGET_GATE, ModelUsage, RunState, dollars


class BudgetExceeded(Exception):
    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def cost_usd(prices: dict[str, ir.Price], model: str, usage: Usage) -> float | None:
    """The reply's price, or None when the table has no price for its model."""
    price = prices.get(model)
    if price is None:
        return None
    return (usage.input_tokens * price.input + usage.output_tokens * price.output) / 1_000_000


def overrun(limit: ir.Budget, spent: ModelUsage) -> str | None:
    """What went over `limit`, as a person should read it, or None. A prompt budget is spent when
    the next prompt would go past it; tokens and dollars once they are past it."""
    tokens, usd = spent.input_tokens + spent.output_tokens, spent.cost_usd
    if limit.iterations is not None and spent.calls >= limit.iterations:
        return f"{spent.calls} prompts sent, as many as the budget allows"
    if limit.tokens is not None and tokens > limit.tokens:
        return f"{tokens} tokens used, over the budget of {limit.tokens}"
    if limit.usd is not None and usd > limit.usd:
        return f"{dollars(usd)} spent, over the budget of {dollars(limit.usd)}"
    return None


def gate_id(step: str | None) -> str:
    return f"{RUN_BUDGET_GATE}:{step}" if step else RUN_BUDGET_GATE


class Budgets:
    """Checked before each prompt; a paused budget waits on `pause` until a person raises or ends it."""

    def __init__(self, state: RunState, pause: Callable[[str, str], Awaitable[bool]]):
        self.state, self.pause = state, pause
        self.paused_steps: dict[str, str | None] = {}  # a budget gate's name -> the step whose budget it is

    async def check(self, steps: list[str]) -> None:
        """Return when every budget in reach allows another prompt; raise BudgetExceeded otherwise."""
        await self._within(steps, fail=True)

    async def wait_while_paused(self, steps: list[str]) -> None:
        """Before handing work to a batch that checks its own prompts: wait while a budget in reach
        that pauses is spent, as `check` would (BudgetExceeded if a person ends it there); a budget
        that fails is left to the prompts, each of which fails on it as it would here."""
        await self._within(steps, fail=False)

    async def _within(self, steps: list[str], *, fail: bool) -> None:
        while True:
            over = self._first_overrun(steps)
            if over is None:
                return
            step, limit, why = over
            if limit.on_exceeded == "fail" and not fail:
                return
            message = f"budget exceeded{f' in step {step}' if step else ''}: {why}"
            self.paused_steps[gate_id(step)] = step
            if limit.on_exceeded == "fail" or not await self.pause(gate_id(step), message):
                raise BudgetExceeded(message)

    def _first_overrun(self, steps: list[str]) -> tuple[str | None, ir.Budget, str] | None:
        state = self.state
        if state.budget is not None:
            why = overrun(state.budget, state.run_usage())
            if why:
                return None, state.budget, why
        for step in steps:
            limit = state.step_budgets[step]
            why = overrun(limit, state.step_usage.get(step, ModelUsage()))
            if why:
                return step, limit, why
        return None

    def raised(self, gate: GateId, tokens: int | None, usd: float | None, iterations: int | None) -> ir.Budget:
        """A person raised the budget a pause is waiting on; the new limits count from now on."""
        step = self.paused_steps[self.state.gates[gate].name]
        old = self.state.step_budgets[step] if step else self.state.budget
        assert old is not None  # a budget that paused the run exists
        given = {"tokens": tokens, "usd": usd, "iterations": iterations}
        new = old.model_copy(update={k: v for k, v in given.items() if v is not None})
        self.state.raise_budget(step, new)
        return new


RESERVATIONS = "budget-reservations"
# A subgraph under a run budget holds what is left of it while it runs (Reservations.hold_all).
SUBGRAPH_HOLDS = "subgraph-holds-the-budget"


class Reservations:
    """Prompts that run side by side (a parallel step's branches, a map's elements, sub-agents)
    under a token or dollar budget: each reserves an estimate before it starts, and none starts
    whose reservation would take the budget past its limit while others are in flight. The estimate
    is the budget's `reserve_tokens`, else the largest prompt seen so far; before any is seen, the
    prompts under such a budget run one at a time. A prompt alone may always start within budget:
    it is the one call a run may finish past its limit."""

    def __init__(self, state: RunState):
        self.state = state
        self.in_flight: dict[str | None, int] = {}  # by budgeted step; None is the run's budget
        self.held = False  # a subgraph is running on what is left of the run's budget
        self.largest_tokens: int | None = None
        self.largest_usd: float | None = None

    async def reserve(self, steps: list[str]) -> None:
        """Wait until a prompt under these budgets may start, and hold its place."""
        # Every waiting prompt's condition is checked before any of them goes on: each checks again.
        while not self._room(steps):
            await workflow.wait_condition(lambda: self._room(steps))
        for account in (None, *steps):
            self.in_flight[account] = self.in_flight.get(account, 0) + 1

    def settle(self, steps: list[str], usage: Usage | None, cost: float) -> None:
        """The prompt is over: its place is freed, and its real usage (once counted) teaches the estimate."""
        for account in (None, *steps):
            self.in_flight[account] -= 1
        if usage is not None:
            tokens = usage.input_tokens + usage.output_tokens
            self.largest_tokens = max(self.largest_tokens or 0, tokens)
            self.largest_usd = max(self.largest_usd or 0.0, cost)

    async def hold_all(self) -> None:
        """Wait until no prompt or other subgraph is in flight, then hold the run's budget whole: a
        subgraph is given what is left of it, so nothing else may spend that while it runs."""
        # Two may be let go by one change: each looks again before it takes the budget.
        while self.held or any(self.in_flight.values()):
            await workflow.wait_condition(lambda: not self.held and not any(self.in_flight.values()))
        self.held = True

    def release_all(self) -> None:
        self.held = False

    def _room(self, steps: list[str]) -> bool:
        if self.held:
            return False
        state = self.state
        # What an account spent is read only where it has a limit: most runs have none.
        if state.budget is not None and not self._fits(state.budget, state.run_usage(), self.in_flight.get(None, 0)):
            return False
        return all(
            self._fits(state.step_budgets[s], state.step_usage.get(s, ModelUsage()), self.in_flight.get(s, 0))
            for s in steps
        )

    def _fits(self, limit: ir.Budget | None, spent: ModelUsage, flying: int) -> bool:
        if limit is None or flying == 0:
            return True
        if limit.tokens is not None:
            estimate = limit.reserve_tokens or self.largest_tokens
            if estimate is None or spent.input_tokens + spent.output_tokens + (flying + 1) * estimate > limit.tokens:
                return False
        if limit.usd is not None:
            if self.largest_usd is None or spent.cost_usd + (flying + 1) * self.largest_usd > limit.usd:
                return False
        return True
