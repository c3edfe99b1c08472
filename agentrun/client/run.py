"""A handle on one run: its state, its events, its result, and what people say to it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError

from agentrun.client import events, humans
from agentrun.client.models import Progress, RunEvent, RunResult
from agentrun.client.no_worker import start_input
from agentrun.client.partial import partials
from agentrun.client.runs import describe, fetch_state, state_if_polled
from agentrun.explain.changes import Wanted
from agentrun.ids import GateId
from agentrun.lang import ir
from agentrun.lang.ir import Budget
from agentrun.models.contract import (
    RUN_BUDGET_GATE,
    Answer,
    AnswerInput,
    BudgetInput,
    Note,
    NoteInput,
    RunState,
)

POLL_S = 0.5  # how often a follower asks a running run for its state


class Run:
    """A run, started or found by id. Every method reaches Temporal; none keeps state of the run's
    besides where `events()` left off."""

    def __init__(self, client: Client, run_id: str) -> None:
        self._client = client
        self.id = run_id
        self.last_event: str | None = None  # the id of the last event events() told

    def __repr__(self) -> str:
        return f"Run({self.id!r})"

    async def status(self) -> RunState:
        """The run's state now: from the worker that holds it, or from its record once it ended.
        Raises NoSuchRun."""
        return await fetch_state(self._client, self.id)

    async def progress(self) -> Progress:
        """The run's state and what its agents have written so far, read together."""
        desc = await describe(self._client, self.id)
        state = await fetch_state(self._client, self.id, desc)
        live = state.status in ("running", "waiting")
        return Progress(state=state, so_far=await partials(self._client, self.id, desc) if live else {})

    async def plan(self) -> ir.Plan | None:
        """The plan the run was started with, from its history (None for a run of a shape this
        release cannot read)."""
        started = await start_input(self._client, self.id)
        return started.plan if started else None

    async def result(self) -> RunResult:
        """Wait for the run to end; what it ended with (a failed run is a result too)."""
        try:
            await self._client.get_workflow_handle(self.id).result()
        except WorkflowFailureError:
            pass  # failed, cancelled or terminated: its state says how
        state = await self.status()
        return RunResult(
            run_id=self.id,
            status=state.status,
            final_output=state.final_output,
            outputs=state.outputs,
            errors=state.errors,
            state=state,
        )

    async def events(
        self, after: str | None = None, poll_s: float = POLL_S, partial: bool = True
    ) -> AsyncIterator[RunEvent]:
        """The run's events from the start (or after the event with id `after`, or where this
        handle's last follower stopped) until it ends. `partial`: tell what agents write as they go."""
        self.last_event = after if after is not None else self.last_event
        said: dict[str, int] = {}
        while True:
            desc = await describe(self._client, self.id)
            ended = desc.status != WorkflowExecutionStatus.RUNNING
            state = await self._snapshot(desc.task_queue, ended)
            for event in events.after(events.told(state, ended), self.last_event) if state else []:
                self.last_event = event.id
                yield event
            if ended:
                return
            if partial:
                for record in (await partials(self._client, self.id, desc)).values():
                    if said.get(record.task) != record.chars:
                        said[record.task] = record.chars
                        yield events.partial(self.id, record)
            await asyncio.sleep(poll_s)

    async def _snapshot(self, task_queue: str, ended: bool) -> RunState | None:
        if ended:
            return await fetch_state(self._client, self.id)
        state, _ = await state_if_polled(self._client, self._client.get_workflow_handle(self.id), task_queue)
        return state

    async def answer(
        self, value: str, gate: str | None = None, comment: str = "", by: str = "", wait_s: float = 60
    ) -> Answer:
        """Answer a gate (`approve`/`reject` an approval); `gate` may be left out when only one is
        open. Raises Refused with the run's reason, NoWorker if no worker took it in `wait_s`."""
        if gate is None:
            gate = humans.only_open_gate(self.id, await self.status(), value)
        given = AnswerInput(gate=GateId(gate), value=value, comment=comment, by=by)
        return await humans.answer_gate(self._client, self.id, given, wait_s)

    async def raise_budget(
        self,
        gate: str = RUN_BUDGET_GATE,
        tokens: int | None = None,
        usd: float | None = None,
        iterations: int | None = None,
        comment: str = "",
        by: str = "",
        wait_s: float = 60,
    ) -> Budget:
        """Raise the budget a run paused on (`budget`, or `budget:STEP` for a step's). Raises Refused,
        NoWorker."""
        raised = BudgetInput(gate=GateId(gate), tokens=tokens, usd=usd, iterations=iterations, comment=comment, by=by)
        return await humans.raise_gate(self._client, self.id, raised, wait_s)

    async def say(self, text: str, step: str = "", by: str = "", wait_s: float = 60) -> Note:
        """A note for the next prompt of `step` (of any step when ""). Raises Refused, NoWorker."""
        return await humans.send_note(self._client, self.id, NoteInput(text=text, step=step, by=by), wait_s)

    async def cancel(self, rollback: bool = False) -> int | None:
        """Cancel the run; `rollback`: run its compensations as it is cancelled, and how many are
        queued so far (a run that refuses a rollback is not cancelled: Refused). Raises NoSuchRun, or
        UsageError for a run that has ended."""
        handle = await humans.running_handle(self._client, self.id)
        queued = await humans.request_rollback(handle) if rollback else None
        await handle.cancel()
        return queued

    async def fork(
        self,
        at: str,
        params: Mapping[str, Any] | None = None,
        memory: Mapping[str, Any] | None = None,
        prompts: Mapping[str, str] | None = None,
        run_id: str | None = None,
        task_queue: str | None = None,
    ) -> Run:
        """A new run of this run's plan that takes over every step before `at` and goes on from
        there with the changes given; it waits on its queue for a worker."""
        from agentrun.client import fork, start

        wanted = Wanted(
            param=[f"{k}={json.dumps(v)}" for k, v in (params or {}).items()],
            set=[f"memory.{k}={json.dumps(v)}" for k, v in (memory or {}).items()],
            prompt=[f"{k}={v}" for k, v in (prompts or {}).items()],
        )
        inp, queue = await fork.forked_input(self._client, self.id, at, wanted, task_queue)
        new_id = run_id or start.new_run_id(inp.plan.name)
        inp.search_attributes = await start.ensure_search_attributes(self._client)
        await start.start_run(self._client, inp, new_id, queue)
        return Run(self._client, new_id)
