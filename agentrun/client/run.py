"""A handle on one run: its state, its events, its result, and what people say to it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

from temporalio.client import Client, WorkflowExecutionDescription, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.service import RPCError

from agentrun.client import conversation, elements, events, humans, retries
from agentrun.client.models import (
    Answered,
    ForkPlan,
    Limits,
    Look,
    Progress,
    Raised,
    RunEvent,
    RunInfo,
    RunResult,
    Said,
    UnderWay,
)
from agentrun.client.no_worker import start_input
from agentrun.client.partial import partials
from agentrun.client.runs import describe, fetch_state, state_if_polled
from agentrun.errors import Unavailable
from agentrun.explain.changes import Wanted
from agentrun.lang import ir
from agentrun.models.calls import Partial
from agentrun.models.contract import AnswerInput, BudgetInput, Note, NoteInput, RunState
from agentrun.models.elements import Page

POLL_S = 0.5  # how often a follower asks a running run for its state


class Run:
    """A run, started or found by id. Every method reaches Temporal; a handle keeps nothing of the
    run's besides its task queue, where `events()` left off and which retries `under_way()` told."""

    def __init__(self, client: Client, run_id: str) -> None:
        self._client = client
        self.id = run_id
        self.last_event: str | None = None  # the id of the last event events() told
        self._retries = retries.Retries(client, run_id)  # what under_way() has told of
        self._queue: str | None = None  # the run's task queue, once read (a run keeps its queue)

    def __repr__(self) -> str:
        return f"Run({self.id!r})"

    async def status(self) -> RunState:
        """The run's state now: from the worker that holds it, or from its record once it ended.
        Raises NoSuchRun."""
        return await fetch_state(self._client, self.id)

    async def build(self) -> str | None:
        """The build the run is pinned to (`deployment:build`), where its workers are versioned
        (docs/operations.md, "Upgrading"); None otherwise. Raises NoSuchRun."""
        from agentrun.worker.versioning import build_of

        return build_of(await describe(self._client, self.id))

    async def info(self) -> RunInfo:
        """Whether the run still runs and which task queue it waits on. Raises NoSuchRun."""
        desc = await describe(self._client, self.id)
        self._queue = desc.task_queue
        return RunInfo(
            run_id=self.id, running=desc.status == WorkflowExecutionStatus.RUNNING, task_queue=desc.task_queue
        )

    async def look(self) -> Look:
        """The state of the running run if a worker answers for it now (within a fraction of a second
        when none polls its queue), and whether a live worker polls it."""
        queue = self._queue or (await self.info()).task_queue
        state, polled = await state_if_polled(self._client, self._client.get_workflow_handle(self.id), queue)
        return Look(state=state, polled=polled)

    async def under_way(self) -> UnderWay:
        """What the run's activities are doing now: each agent's reply so far, and the retries this
        handle has not told of yet."""
        desc = await describe(self._client, self.id)
        return UnderWay(so_far=await partials(self._client, self.id, desc), retries=await self._retries.new(desc))

    async def so_far(self) -> dict[str, Partial]:
        """What each agent call under way has written so far, by the step's run key. Raises
        Unavailable when Temporal does not answer."""
        try:
            return await partials(self._client, self.id)
        except RPCError as exc:
            raise Unavailable(f"Temporal did not say what run {self.id} is doing: {exc.message}") from None

    async def ended(self) -> None:
        """Wait until the run ends, however it ends."""
        try:
            await self._client.get_workflow_handle(self.id).result()
        except WorkflowFailureError:
            pass  # failed, cancelled or terminated: its state says how

    async def lost_workers(self) -> list[str]:
        """The steps retried because their worker stopped answering: `build (attempt 2)`."""
        return await retries.lost_workers(self._client, self.id)

    async def elements(self, map_step: str, page: int = 1, limit: int = elements.DEFAULT_LIMIT) -> Page:
        """A page of a map step's elements (from its batches for a batched map). Raises UsageError
        for a run without that map or a page past its last."""
        return await elements.page(self._client, await self.status(), map_step, page, limit)

    def conversation(self, follow: bool = False) -> AsyncIterator[Said]:
        """What was said to each agent and what it answered, in order, from the run's history;
        `follow`: go on as the run does, until it ends."""
        return conversation.conversation(self._client, self.id, follow)

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
        await self.ended()
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
            state = await self._snapshot(desc, ended)
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

    async def _snapshot(self, desc: WorkflowExecutionDescription, ended: bool) -> RunState | None:
        if ended:
            return await fetch_state(self._client, self.id, desc)  # its record, read once
        handle = self._client.get_workflow_handle(self.id)
        state, _ = await state_if_polled(self._client, handle, desc.task_queue)
        return state

    async def answer(
        self, value: str, gate: str | None = None, comment: str = "", by: str = "", wait_s: float = 60, digest: str = ""
    ) -> Answered:
        """Answer a gate (`approve`/`reject` an approval); `gate` may be left out when only one is
        open. Waits up to `wait_s` for a worker to hold the run. Raises Refused with the run's reason,
        NoWorker if no worker took it in time. `digest`: a tool call's gate only while it asks about
        the arguments with that digest."""
        return await humans.answer(self._client, self.id, value, gate, comment, by, wait_s, digest)

    async def approve(
        self,
        gate: str | None = None,
        comment: str = "",
        by: str = "",
        *,
        pattern: bool = False,
        digest: str = "",
        wait_s: float = 60,
    ) -> Answered:
        """Approve an approval gate; a tool call's (the policy's `ask`) runs once, with the arguments
        its gate shows. `pattern`: every later call the same `ask` pattern takes runs without asking,
        for the rest of the run. `digest` (the gate's `call.digest`): refused if the gate now asks
        about other arguments."""
        value = ir.APPROVE_PATTERN if pattern else ir.APPROVE
        return await humans.answer(self._client, self.id, value, gate, comment, by, wait_s, digest)

    async def reject(
        self, gate: str | None = None, comment: str = "", by: str = "", *, digest: str = "", wait_s: float = 60
    ) -> Answered:
        """Reject an approval gate; a tool call's is not made, and the agent reads `comment` as its result."""
        return await humans.answer(self._client, self.id, ir.REJECT, gate, comment, by, wait_s, digest)

    async def queue_answer(
        self, value: str, gate: str | None = None, comment: str = "", by: str = "", digest: str = ""
    ) -> AnswerInput:
        """Write an answer to the run's history for whichever worker takes the run next (the run
        checks it then: a refusal shows in `Engine.pending()`)."""
        return await humans.queue_answer(self._client, self.id, value, gate, comment, by, digest)

    async def raise_budget(
        self,
        gate: str | None = None,
        tokens: int | None = None,
        usd: float | None = None,
        iterations: int | None = None,
        comment: str = "",
        by: str = "",
        wait_s: float = 60,
    ) -> Raised:
        """Raise the budget a run paused on (`budget`, or `budget:STEP` for a step's; the one paused
        when left out). Raises Refused, NoWorker."""
        given = Limits(tokens=tokens, usd=usd, iterations=iterations, comment=comment, by=by)
        return await humans.raise_budget(self._client, self.id, gate, given, wait_s)

    async def queue_budget(
        self,
        gate: str | None = None,
        tokens: int | None = None,
        usd: float | None = None,
        iterations: int | None = None,
        comment: str = "",
        by: str = "",
    ) -> BudgetInput:
        """Write a budget raise to the run's history for whichever worker takes the run next."""
        given = Limits(tokens=tokens, usd=usd, iterations=iterations, comment=comment, by=by)
        return await humans.queue_budget(self._client, self.id, gate, given)

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
        spec: str | None = None,
    ) -> Run:
        """A new run of this run's plan (or of the changed spec file `spec`, its steps matched by id)
        that takes over every step before `at` and goes on from there with the changes given; it
        waits on its queue for a worker. Raises SpecError where ids it would take over vanished."""
        wanted = Wanted(dict(params or {}), dict(memory or {}), dict(prompts or {}), spec)
        from agentrun.client.engine import Engine  # the engine imports this module

        planned = await self.prepare_fork(at, wanted, task_queue)
        return await Engine(self._client).start_input(planned.input, run_id, planned.task_queue)

    async def prepare_fork(self, at: str, changes: Wanted, task_queue: str | None = None) -> ForkPlan:
        """What `fork()` starts, not started yet: the input, the queue, and notes for the person
        (`explain.changes.from_options` makes `changes` from the command line's options)."""
        from agentrun.client import fork  # what a fork checks its changes with, loaded by a fork only

        return await fork.forked_input(self._client, self.id, at, changes, task_queue)
