"""People answering runs: the open questions across runs, answers, approvals, budget raises, notes.

Answers travel as Temporal updates. The run's validators decide; a refused update comes back as
WorkflowUpdateFailedError with the refusal as its cause, and nothing of it reaches history. How an
answer reaches a run no worker holds right now (waiting for one, or queued) is client.delivery's.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from temporalio.client import Client, WorkflowExecution, WorkflowUpdateFailedError
from temporalio.service import RPCError

from agentrun import spelling
from agentrun.client.delivery import enqueue, when_alive, when_held
from agentrun.client.models import Answered, Limits, OpenGate, Pending, Question, Raised, Unanswered
from agentrun.client.runs import RunHandle, ask_state, fetch_state, live_worker, running
from agentrun.errors import NoSuchRun, Refused, UsageError
from agentrun.explain import gates, waiting
from agentrun.ids import GateId
from agentrun.lang.ir import APPROVE, REJECT, Budget
from agentrun.models import contract, limits
from agentrun.models.contract import (
    RUN_BUDGET_GATE,
    Answer,
    AnswerInput,
    BudgetInput,
    Gate,
    Inbox,
    Note,
    NoteInput,
    RunState,
    open_gates,
    unsettled_refusals,
)

__all__ = ["Refused"]  # raised here; the CLI and the page catch it by this name

T = TypeVar("T")

WAITING_QUERY = 'WorkflowType="AgentRun" AND ExecutionStatus="Running" AND AgentRunWaitingFor!=""'
RUNNING_QUERY = 'WorkflowType="AgentRun" AND ExecutionStatus="Running"'


# ---- pending ---------------------------------------------------------------------------------------

DESCRIBES_AT_ONCE = 16  # task queues asked at once whether a worker polls them


@dataclass
class Listed:
    """A running run as the server's visibility store lists it: no query to its worker."""

    run_id: str
    spec: str
    task_queue: str
    waiting_for: str  # "" when the server does not say (its search attribute is missing)
    inbox: Inbox | None  # None for a run started before runs kept their open gates in their memo


async def pending(client: Client, limit: int | None = None) -> Pending:
    """Every open gate of every running run, oldest question first, and the runs that wait with no
    worker polling their queue. Read from the server's visibility store (each run's memo); only a run
    started before runs kept their gates there is asked, as before. `limit`: of the runs started
    last, at most this many (listing costs the server about a millisecond a run)."""
    listed = await _listed(client, limit)
    known = [(run, run.inbox) for run in listed if run.inbox is not None]
    questions = [_from_memo(found) for found in _open_gates(known)]
    refused = [(run.run_id, message) for run, box in known for message in box.refused]
    waiting_runs = [run for run, box in known if box.gates]
    served = await _served(client, {run.task_queue for run in waiting_runs})
    unanswered = [
        Unanswered(run_id=run.run_id, spec=run.spec, waiting=True, fix=waiting.hint(run.run_id, run.task_queue))
        for run in waiting_runs
        if not served[run.task_queue]
    ]
    old = await _asked(client, {run.run_id: run.waiting_for for run in listed if run.inbox is None})
    questions = sorted(questions + old.questions, key=lambda q: q.waiting_since or "")
    return Pending(
        questions=questions + _unread_rows(old),
        unanswered=unanswered + old.unanswered,
        refused=refused + old.refused,
        more=await _beyond(client, limit, len(listed)),
    )


async def open_gates_listed(client: Client, limit: int | None = None) -> list[OpenGate]:
    """Every open gate of every running run (of the `limit` started last), as the runs' memos say
    (the inbox); a run started before runs kept them there is asked for its state."""
    listed = await _listed(client, limit)
    found = _open_gates([(run, run.inbox) for run in listed if run.inbox is not None])
    asked = await _states(client, [run.run_id for run in listed if run.inbox is None])
    return found + [
        OpenGate(run_id=state.run_id, spec=state.spec, gate=gate) for state in asked for gate in open_gates(state)
    ]


def _open_gates(runs: list[tuple[Listed, Inbox]]) -> list[OpenGate]:
    return [OpenGate(run_id=run.run_id, spec=run.spec, gate=gate) for run, box in runs for gate in box.gates]


def _from_memo(found: OpenGate) -> Question:
    return _question(RunState(run_id=found.run_id, spec=found.spec), found.gate)


async def _served(client: Client, queues: set[str]) -> dict[str, bool]:
    """Whether a live worker polls each queue: one look per queue, however many runs wait on it."""
    limit = asyncio.Semaphore(DESCRIBES_AT_ONCE)

    async def polled(queue: str) -> bool:
        async with limit:
            return await live_worker(client, queue)

    return dict(zip(queues, await asyncio.gather(*(polled(q) for q in queues)), strict=True))


async def _listed(client: Client, limit: int | None = None) -> list[Listed]:
    """The running runs that may wait for someone (the `limit` started last), from the visibility
    store: those whose search attribute says they wait, or every running run on a server without it."""
    page = min(limit, 1000) if limit else 1000
    for query in (WAITING_QUERY, RUNNING_QUERY):
        try:
            return [await _listing(wf) async for wf in client.list_workflows(query, limit=limit, page_size=page)]
        except RPCError:
            continue
    return []


async def count_waiting(client: Client) -> int:
    """How many running runs wait for someone, as their search attribute says (0 without it)."""
    try:
        return (await client.count_workflows(WAITING_QUERY)).count
    except RPCError:
        return 0


async def _beyond(client: Client, limit: int | None, listed: int) -> int:
    """The waiting runs a listing of `limit` left out."""
    if limit is None or listed < limit:
        return 0
    return max(0, await count_waiting(client) - listed)


async def _listing(wf: WorkflowExecution) -> Listed:
    attrs = wf.typed_search_attributes
    memo = await _inbox_memo(wf)
    spec = attrs.get(contract.SPEC) or (memo.spec if memo else "")
    return Listed(wf.id, spec, wf.task_queue or "", attrs.get(contract.WAITING_FOR) or "", memo)


async def _inbox_memo(wf: WorkflowExecution) -> Inbox | None:
    """The run's inbox memo; read straight from its JSON when it is plain JSON (thousands are
    listed at once), through the data converter otherwise (a large value kept elsewhere)."""
    payload = wf.raw_info.memo.fields.get(contract.INBOX_MEMO)
    if payload is None:
        return None
    if payload.metadata.get("encoding") == b"json/plain":
        return Inbox.model_validate_json(payload.data)
    return await wf.memo_value(contract.INBOX_MEMO, None, type_hint=Inbox)


# Runs started before runs kept their gates in their memo: asked by query, as they always were.


async def _asked(client: Client, asked: dict[str, str]) -> Pending:
    states = await _states(client, list(asked))
    questions = [_question(state, gate) for state in states for gate in open_gates(state)]
    unanswered = [_unanswered(state, asked[state.run_id]) for state in states if waiting.NO_WORKER in state.warnings]
    refused = [(state.run_id, refusal.message) for state in states for refusal in unsettled_refusals(state)]
    return Pending(questions=questions, unanswered=unanswered, refused=refused)


def _unread_rows(old: Pending) -> list[Question]:
    # A run that waits for a person is listed even when its question cannot be read now.
    return [_unread(run) for run in old.unanswered if run.waiting]


def _unanswered(state: RunState, waiting_for: str) -> Unanswered:
    fix = next(iter(waiting.notes(state)), f"start one with `{spelling.worker()}`")
    return Unanswered(run_id=state.run_id, spec=state.spec, waiting=bool(waiting_for), fix=fix)


async def waiting_states(client: Client) -> list[RunState]:
    """The state of every running run that may wait for someone (a query to each)."""
    return await _states(client, [run.run_id for run in await _listed(client)])


async def _states(client: Client, run_ids: list[str]) -> list[RunState]:
    return [s for s in await asyncio.gather(*(_state_if_any(client, r) for r in run_ids)) if s]


async def _state_if_any(client: Client, run_id: str) -> RunState | None:
    # fetch_state, not a bare query: a run listed as running may have ended (or gone) since.
    try:
        return await fetch_state(client, run_id)
    except NoSuchRun:
        return None


async def states_within(client: Client, run_ids: list[str], wait_s: float) -> dict[str, RunState]:
    """The states the workers holding these runs give within wait_s (a page of the inbox's worth)."""
    asked = await asyncio.gather(*(ask_state(client.get_workflow_handle(r), wait_s) for r in run_ids))
    return {run_id: state for run_id, state in zip(run_ids, asked, strict=True) if state}


def _unread(run: Unanswered) -> Question:
    """A run that waits for a person while no worker holds it to say for what."""
    prompt = f"(its question is read once a worker holds the run; {run.fix})"
    return Question(run_id=run.run_id, spec=run.spec, gate=None, kind=None, prompt=prompt)


def _question(state: RunState, gate: Gate) -> Question:
    return Question(
        run_id=state.run_id,
        spec=state.spec,
        gate=gate.id,
        kind=gate.kind,
        prompt=gate.prompt,
        choices=gates.choices(gate),
        waiting_since=gate.opened_at.isoformat(timespec="seconds") if gate.opened_at else None,
        timeout_at=gate.timeout_at.isoformat(timespec="seconds") if gate.timeout_at else None,
        call=gate.call,
    )


# ---- answer, approve, reject, budget, say ----------------------------------------------------------


async def answer(
    client: Client,
    run_id: str,
    value: str,
    gate: str | None,
    comment: str,
    by: str,
    wait_s: float,
    digest: str = "",
) -> Answered:
    """Answer `gate` (the run's one open gate when None, read from the worker that holds the run) once
    a worker holds the run, waiting up to wait_s for one. `digest`: a tool call's gate is answered
    only while it asks about the arguments with that digest (what the person saw)."""

    async def send(handle: RunHandle, chosen: str) -> Answered:
        given = AnswerInput(gate=GateId(chosen), value=value, comment=comment, by=by, digest=digest)
        answered: Answer = await _update(handle, contract.ANSWER, given, Answer)
        return Answered(gate=chosen, **answered.model_dump())

    pick = functools.partial(only_open_gate, run_id, value=value)
    return await _to_gate(client, run_id, gate, pick, send, "the answer", wait_s)


async def queue_answer(
    client: Client, run_id: str, value: str, gate: str | None, comment: str, by: str, digest: str = ""
) -> AnswerInput:
    """Write an answer to the run's history for whichever worker takes the run next."""
    pick = functools.partial(only_open_gate, run_id, value=value)
    handle, chosen = await _queued_gate(client, run_id, gate, pick)
    given = AnswerInput(gate=GateId(chosen), value=value, comment=comment, by=by, digest=digest)
    await enqueue(handle, contract.QUEUE_ANSWER, given, "the answer")
    return given


async def raise_budget(client: Client, run_id: str, gate: str | None, limits_given: Limits, wait_s: float) -> Raised:
    """Raise a paused budget (`gate`, or the one paused when None) once a worker holds the run."""

    async def send(handle: RunHandle, chosen: str) -> Raised:
        given = BudgetInput(gate=GateId(chosen), **limits_given.model_dump())
        budget: Budget = await _update(handle, contract.RAISE_BUDGET, given, Budget)
        return Raised(gate=chosen, budget=budget)

    return await _to_gate(client, run_id, gate, _paused_budget, send, "the budget raise", wait_s)


async def queue_budget(client: Client, run_id: str, gate: str | None, limits_given: Limits) -> BudgetInput:
    """Write a budget raise to the run's history for whichever worker takes the run next."""
    handle, chosen = await _queued_gate(client, run_id, gate, _paused_budget)
    given = BudgetInput(gate=GateId(chosen), **limits_given.model_dump())
    await enqueue(handle, contract.QUEUE_BUDGET, given, "the budget raise")
    return given


async def _to_gate(
    client: Client,
    run_id: str,
    gate: str | None,
    pick: Callable[[RunState], str],
    send: Callable[[RunHandle, str], Awaitable[T]],
    what: str,
    wait_s: float,
) -> T:
    """`send` to `gate`, or to the gate `pick` finds in the state of the worker that holds the run,
    once a worker holds it (waiting up to wait_s). A named gate needs no look at the state first."""
    handle, queue = await running(client, run_id)
    if gate:
        return await when_alive(client, handle, queue, wait_s, what, lambda: send(handle, gate))
    return await when_held(client, handle, queue, wait_s, what, lambda state: send(handle, pick(state)))


async def _queued_gate(
    client: Client, run_id: str, gate: str | None, pick: Callable[[RunState], str]
) -> tuple[RunHandle, str]:
    """The running run's handle and the gate a queued answer goes to: `gate`, or the one `pick` finds
    in the state a worker gives now (a queued answer cannot wait for one to say)."""
    handle, _ = await running(client, run_id)
    return handle, gate or pick(_readable(run_id, await ask_state(handle)))


async def send_note(client: Client, run_id: str, given: NoteInput, wait_s: float = 60.0) -> Note:
    """Deliver a note the way `say` does; Refused with the run's reason (a finished step)."""
    handle, queue = await running(client, run_id)
    return await when_alive(
        client, handle, queue, wait_s, "the note", lambda: _update(handle, contract.SAY, given, Note)
    )


def _paused_budget(state: RunState) -> str:
    paused = [g.id for g in open_gates(state) if g.kind == "budget"]
    return paused[0] if len(paused) == 1 else RUN_BUDGET_GATE


def _readable(run_id: str, state: RunState | None) -> RunState:
    """The state a gate is picked from when none is named; a queued answer cannot wait for a worker to read it."""
    if state is None:
        raise UsageError(
            f"no worker is answering for run {run_id} to say which gate is open: with --no-wait, name the "
            "gate with --gate ID"
        )
    return state


async def running_handle(client: Client, run_id: str) -> RunHandle:
    """The handle of a run that can take an update or a cancellation: it exists (else NoSuchRun) and
    is still running."""
    return (await running(client, run_id))[0]


def only_open_gate(run_id: str, state: RunState, value: str) -> str:
    """The gate meant when none is named: the run's one open gate."""
    open_now = open_gates(state)
    if len(open_now) != 1:
        names = ", ".join(f"{g.id} ({g.kind})" for g in open_now)
        raise UsageError(
            f"run {run_id} has {len(open_now)} open gates{': ' + names if names else ''}; name one with --gate ID"
        )
    gate = open_now[0]
    # `approve` on a free-text question would be taken as its answer: make the person say so.
    if value in (APPROVE, REJECT) and gate.kind == "question" and value not in gate.choices:
        raise UsageError(
            f"gate '{gate.id}' is a question, not an approval: answer it with "
            f"`{spelling.client()} answer {run_id} --gate {gate.id} VALUE`"
        )
    return gate.id


async def request_rollback(handle: RunHandle) -> int:
    """Ask the run to run its compensations when the cancellation that follows reaches it; how many
    are queued so far."""
    return await _update(handle, contract.ROLLBACK, None, int)


async def _update(handle: RunHandle, name: str, arg: Any, result_type: type) -> Any:
    _within_limits(arg)
    try:
        if arg is None:
            return await handle.execute_update(name, result_type=result_type)
        return await handle.execute_update(name, arg, result_type=result_type)
    except WorkflowUpdateFailedError as exc:
        raise Refused(getattr(exc.cause, "message", None) or str(exc.cause)) from None
    except RPCError as exc:  # e.g. the run ended between our check and the update
        raise Refused(f"run {handle.id} did not take the update: {exc.message}") from None


def _within_limits(arg: Any) -> None:
    """What a person sends is held to the run's size limits here, before it goes, as the run's
    validators hold it again (agentrun.models.limits)."""
    if isinstance(arg, NoteInput | AnswerInput | BudgetInput) and (refused := limits.refusal(arg)):
        raise UsageError(refused)
