"""People answering runs: the open questions across runs, answers, approvals, budget raises, and
answering inline while a run is followed on a terminal.

Answers travel as Temporal updates. The run's validators decide; a refused update comes back as
WorkflowUpdateFailedError with the refusal as its cause, and nothing of it reaches history. How an
answer reaches a run no worker holds right now (waiting for one, or --no-wait) is client.delivery's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import getpass
import json
import sys
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any, NamedTuple

from rich.console import Console
from rich.prompt import Prompt
from rich.table import Table
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.service import RPCError

from agentrun import spelling
from agentrun.client import no_worker
from agentrun.client.delivery import enqueue, when_alive, when_held
from agentrun.client.no_worker import NO_WORKER
from agentrun.client.runs import NoSuchRun, RunHandle, UsageError, ask_state, fetch_state, running
from agentrun.ids import GateId
from agentrun.lang.ir import APPROVE, REJECT, Budget
from agentrun.models import contract, limits
from agentrun.models.contract import (
    RUN_BUDGET_GATE,
    Answer,
    AnswerInput,
    BudgetInput,
    Gate,
    Note,
    NoteInput,
    RunState,
    limits_text,
    open_gates,
    unsettled_refusals,
)

# Asks a person for a gate's answer; None leaves the gate to be answered elsewhere.
Prompter = Callable[[Gate], "str | None"]

WAITING_QUERY = 'WorkflowType="AgentRun" AND ExecutionStatus="Running" AND AgentRunWaitingFor!=""'
RUNNING_QUERY = 'WorkflowType="AgentRun" AND ExecutionStatus="Running"'


class Refused(UsageError):
    """The run refused an update; the message is its reason."""


# ---- pending ---------------------------------------------------------------------------------------


class Pending(NamedTuple):
    rows: list[dict[str, Any]]  # one per open gate, oldest question first
    unanswered: list[Unanswered]  # runs whose questions cannot be read: no worker holds them
    refused: list[tuple[str, str]]  # (run id, why) for queued answers refused whose gate is still open


class Unanswered(NamedTuple):
    """A run no worker holds now, so its questions cannot be read; `waiting` when the run said, last
    time a worker held it, that it waits for a person; `fix` how to get a worker to it."""

    run_id: str
    spec: str
    waiting: bool
    fix: str


async def pending(client: Client) -> Pending:
    """Every open gate of every running run, and every run that waits for a person whose questions
    no worker can read right now (its worker ended with the terminal that ran it)."""
    waiting = await _waiting_runs(client)
    states = [s for s in await asyncio.gather(*(_state_if_any(client, r) for r in waiting)) if s]
    rows = [_row(state, gate) for state in states for gate in open_gates(state)]
    return Pending(
        sorted(rows, key=lambda row: row["waiting_since"] or ""),
        [_unanswered(state, waiting[state.run_id]) for state in states if NO_WORKER in state.warnings],
        [(state.run_id, refusal.message) for state in states for refusal in unsettled_refusals(state)],
    )


def _unanswered(state: RunState, waiting_for: str) -> Unanswered:
    fix = next(iter(no_worker.notes(state)), f"start one with `{spelling.worker()}`")
    return Unanswered(state.run_id, state.spec, bool(waiting_for), fix)


async def waiting_states(client: Client) -> list[RunState]:
    """The state of every running run that may wait for someone."""
    run_ids = await _waiting_runs(client)
    return [s for s in await asyncio.gather(*(_state_if_any(client, r) for r in run_ids)) if s]


async def _state_if_any(client: Client, run_id: str) -> RunState | None:
    # fetch_state, not a bare query: a run listed as running may have ended (or gone) since.
    try:
        return await fetch_state(client, run_id)
    except NoSuchRun:
        return None


async def _waiting_runs(client: Client) -> dict[str, str]:
    """Run id → whom it said it waits for when a worker last held it ("" when the server does not
    say: its search attribute is missing, and every running run is asked)."""
    # The search attribute narrows the runs to ask; a server without it gets every running run asked.
    for query in (WAITING_QUERY, RUNNING_QUERY):
        try:
            return {
                wf.id: wf.typed_search_attributes.get(contract.WAITING_FOR) or ""
                async for wf in client.list_workflows(query)
            }
        except RPCError:
            continue
    return {}


def _unread_row(run: Unanswered) -> dict[str, Any]:
    """A row for a run that waits for a person while no worker holds it to say for what."""
    return {
        "run_id": run.run_id,
        "spec": run.spec,
        "gate": None,
        "kind": None,
        "prompt": f"(its question is read once a worker holds the run; {run.fix})",
        "choices": [],
        "waiting_since": None,
        "timeout_at": None,
    }


def _row(state: RunState, gate: Gate) -> dict[str, Any]:
    return {
        "run_id": state.run_id,
        "spec": state.spec,
        "gate": gate.id,
        "kind": gate.kind,
        "prompt": gate.prompt,
        "choices": choices(gate),
        "waiting_since": _iso(gate.opened_at),
        "timeout_at": _iso(gate.timeout_at),
    }


async def pending_command(client: Client, args: argparse.Namespace, console: Console) -> int:
    rows, unanswered, refused = await pending(client)
    for run in unanswered:
        print(f"warning: run {run.run_id}: {NO_WORKER}; {run.fix}", file=sys.stderr)
    for run_id, message in refused:
        print(f"warning: run {run_id}: {message}", file=sys.stderr)
    # A run that waits for a person is listed even when its question cannot be read now.
    rows = rows + [_unread_row(run) for run in unanswered if run.waiting]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        console.print("no run is waiting for anyone", markup=False)
        return 0
    table = Table(box=None, header_style="bold", pad_edge=False)
    for name in ("RUN", "GATE", "KIND"):
        table.add_column(name, no_wrap=True)
    table.add_column("PROMPT", overflow="fold")
    for name in ("CHOICES", "WAITING SINCE", "TIMEOUT AT"):
        table.add_column(name, no_wrap=True)
    for row in rows:
        table.add_row(
            row["run_id"],
            row["gate"] or "?",
            row["kind"] or "?",
            row["prompt"],
            "/".join(row["choices"]),
            _when(row["waiting_since"]),
            _when(row["timeout_at"]) or "-",
        )
    # Piped output keeps every cell whole; a terminal folds long prompts to its width.
    out = console if console.is_terminal else Console(file=console.file, width=10_000, highlight=False)
    out.print(table)
    console.print(
        f"answer with: {spelling.client()} answer RUN --gate GATE VALUE (or approve / reject RUN --gate GATE)",
        markup=False,
    )
    return 0


# ---- answer, approve, reject, budget ---------------------------------------------------------------


async def answer_command(client: Client, args: argparse.Namespace, console: Console) -> int:
    """`answer`, `approve` and `reject`: the value is the command's own for the last two."""
    value = {"approve": APPROVE, "reject": REJECT}.get(args.command) or args.value
    handle, queue = await running(client, args.run_id)

    def given(state: RunState | None) -> AnswerInput:
        gate_id = args.gate or only_open_gate(handle.id, _readable(handle.id, state), value)
        return AnswerInput(gate=GateId(gate_id), value=value, comment=args.comment or "", by=_who(args))

    if args.no_wait:
        answer = given(None if args.gate else await ask_state(handle))
        await enqueue(handle, contract.QUEUE_ANSWER, answer, "the answer")
        _queued(console, f"answer '{value}' to gate {answer.gate}")
        return 0

    async def deliver(state: RunState) -> tuple[str, Answer]:
        answer = given(state)
        return answer.gate, await send_answer(handle, answer)

    gate_id, answer = await when_held(client, handle, queue, args.wait, "the answer", deliver)
    console.print(f"gate {gate_id} answered: {answer.value}", markup=False, highlight=False)
    return 0


async def budget_command(client: Client, args: argparse.Namespace, console: Console) -> int:
    handle, queue = await running(client, args.run_id)

    def given(state: RunState | None) -> BudgetInput:
        return BudgetInput(
            gate=GateId(args.gate or _paused_budget(_readable(handle.id, state))),
            tokens=args.tokens,
            usd=args.usd,
            iterations=args.iterations,
            comment=args.comment or "",
            by=_who(args),
        )

    if args.no_wait:
        raised = given(None if args.gate else await ask_state(handle))
        await enqueue(handle, contract.QUEUE_BUDGET, raised, "the budget raise")
        limits = limits_text(Budget(tokens=raised.tokens, usd=raised.usd, iterations=raised.iterations))
        _queued(console, f"raise of budget {raised.gate} to {limits}")
        return 0

    async def deliver(state: RunState) -> tuple[str, Budget]:
        raised = given(state)
        return raised.gate, await raise_budget(handle, raised)

    gate_id, budget = await when_held(client, handle, queue, args.wait, "the budget raise", deliver)
    console.print(f"budget {gate_id} raised to {limits_text(budget)}", markup=False, highlight=False)
    return 0


async def say_command(client: Client, args: argparse.Namespace, console: Console) -> int:
    """`say`: a note for the next prompt of a step (or of any step), through the run's `say` update."""
    given = NoteInput(text=args.text, step=args.step or "", by=_who(args))
    note = await send_note(client, args.run_id, given, args.wait)
    where = f"step {note.step}'s next prompt" if note.step else "the next prompt"
    console.print(f"note {note.n} from {note.by or 'you'} is for {where}", markup=False, highlight=False)
    return 0


async def send_note(client: Client, run_id: str, given: NoteInput, wait_s: float = 60.0) -> Note:
    """Deliver a note the way `say` does; Refused with the run's reason (a finished step)."""
    return await _when_held(client, run_id, contract.SAY, given, Note, "the note", wait_s)


async def answer_gate(client: Client, run_id: str, answer: AnswerInput, wait_s: float) -> Answer:
    """Send an answer to a named gate the way `answer` does."""
    return await _when_held(client, run_id, contract.ANSWER, answer, Answer, "the answer", wait_s)


async def raise_gate(client: Client, run_id: str, raised: BudgetInput, wait_s: float) -> Budget:
    """Raise a paused budget the way `budget` does."""
    return await _when_held(client, run_id, contract.RAISE_BUDGET, raised, Budget, "the budget raise", wait_s)


async def _when_held(client: Client, run_id: str, update: str, arg: Any, kind: type, what: str, wait_s: float) -> Any:
    """The update's result, sent once a worker holds the run (when_held waits up to wait_s for one)."""
    handle, queue = await running(client, run_id)
    return await when_alive(client, handle, queue, wait_s, what, lambda: _update(handle, update, arg, kind))


def _who(args: argparse.Namespace) -> str:
    return user() if args.by is None else args.by


def _paused_budget(state: RunState) -> str:
    paused = [g.id for g in open_gates(state) if g.kind == "budget"]
    return paused[0] if len(paused) == 1 else RUN_BUDGET_GATE


def _readable(run_id: str, state: RunState | None) -> RunState:
    """The state a gate is picked from when --gate is left out; --no-wait cannot wait for a worker to read it."""
    if state is None:
        raise UsageError(
            f"no worker is answering for run {run_id} to say which gate is open: with --no-wait, name the "
            "gate with --gate ID"
        )
    return state


def _queued(console: Console, what: str) -> None:
    console.print(
        f"{what} queued: the run checks it when a worker takes it; a refusal shows in `{spelling.client()} pending`",
        markup=False,
        highlight=False,
    )


async def running_handle(client: Client, run_id: str) -> RunHandle:
    """The handle of a run that can take an update or a cancellation: it exists (else NoSuchRun) and
    is still running."""
    return (await running(client, run_id))[0]


def only_open_gate(run_id: str, state: RunState, value: str) -> str:
    """The gate meant when --gate is left out: the run's one open gate."""
    waiting = open_gates(state)
    if len(waiting) != 1:
        names = ", ".join(f"{g.id} ({g.kind})" for g in waiting)
        raise UsageError(
            f"run {run_id} has {len(waiting)} open gates{': ' + names if names else ''}; name one with --gate ID"
        )
    gate = waiting[0]
    # `approve` on a free-text question would be taken as its answer: make the person say so.
    if value in (APPROVE, REJECT) and gate.kind == "question" and value not in gate.choices:
        raise UsageError(
            f"gate '{gate.id}' is a question, not an approval: answer it with "
            f"`{spelling.client()} answer {run_id} --gate {gate.id} VALUE`"
        )
    return gate.id


async def send_answer(handle: RunHandle, answer: AnswerInput) -> Answer:
    """Deliver an answer; Refused with the run's reason if its validator turns it down."""
    return await _update(handle, contract.ANSWER, answer, Answer)


async def raise_budget(handle: RunHandle, raised: BudgetInput) -> Budget:
    return await _update(handle, contract.RAISE_BUDGET, raised, Budget)


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


def user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a bare container)
        return ""


# ---- following a run -------------------------------------------------------------------------------


def how_to_answer(run_id: str, gate: Gate) -> str:
    """The command that answers a gate, for the line that announces it."""
    base = spelling.client()
    if gate.kind == "budget":
        return (
            f"raise it with: {base} budget {run_id} --gate {gate.id} {_raising(gate.prompt)}, or {base} "
            f"reject {run_id} --gate {gate.id}"
        )
    if gate.kind == "approval":
        return f"answer with: {base} approve {run_id} --gate {gate.id} (or reject)"
    return f"answer with: {base} answer {run_id} --gate {gate.id} VALUE"


# How a paused budget's question (workflows.budgets.overrun) names the limit that was hit.
_LIMIT_FLAGS = (("prompts sent", "--iterations N"), ("tokens used", "--tokens N"), ("spent, over", "--usd X"))


def _raising(prompt: str) -> str:
    """The option that raises the limit the run hit; all of them when the question does not say."""
    hit = [flag for words, flag in _LIMIT_FLAGS if words in prompt]
    return hit[0] if len(hit) == 1 else "--tokens N (or --usd X, --iterations N)"


def terminal_prompter(console: Console) -> Prompter:
    """Asks on the terminal; an empty answer or end of input leaves the gate open."""

    def ask(gate: Gate) -> str | None:
        given = choices(gate)
        try:
            value = _Choice.ask(f"{gate.id}: {gate.prompt}", choices=given or None, console=console, aliases=given)
        except EOFError:
            return None
        return value or None

    return ask


class _Choice(Prompt):
    """A prompt that takes y/yes and n/no for approve and reject, as people type at a terminal."""

    def __init__(self, *args: Any, aliases: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.aliases = yes_no(aliases or [])

    @classmethod
    def ask(cls, *args: Any, aliases: list[str] | None = None, **kwargs: Any) -> Any:  # type: ignore[override]
        return cls(*args, aliases=aliases, **kwargs)()

    def process_response(self, value: str) -> str:
        return super().process_response(self.aliases.get(value.strip().lower(), value))


def yes_no(given: list[str]) -> dict[str, str]:
    """y, yes, n and no for a gate's approve and reject, unless it takes those words as its own."""
    if APPROVE not in given or REJECT not in given or {"y", "yes", "n", "no"} & {c.lower() for c in given}:
        return {}
    return {"y": APPROVE, "yes": APPROVE, "n": REJECT, "no": REJECT}


async def answer_inline(handle: RunHandle, gate: Gate, prompter: Prompter, console: Console) -> None:
    """Ask a person at this terminal and send their answer; a refusal (someone answered first) is shown."""
    value = await _in_daemon_thread(prompter, gate)
    if value is None:
        console.print(f"  gate {gate.id} left open: {how_to_answer(handle.id, gate)}", markup=False, highlight=False)
        return
    try:
        await send_answer(handle, AnswerInput(gate=gate.id, value=value, by=user()))
    except Refused as exc:
        console.print(f"error: {exc}", style="red", markup=False, highlight=False)


def _in_daemon_thread(prompter: Prompter, gate: Gate) -> asyncio.Future:
    """Run the prompter in a thread, so the event loop keeps running the in-process worker.

    Not asyncio.to_thread: on Ctrl-C, asyncio.run joins its executor's threads, and one blocked in
    input() would hold the CLI until Enter is pressed. A daemon thread is left behind instead.
    """
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if not future.done():
            future.set_exception(error) if error else future.set_result(value)

    def run() -> None:
        try:
            value, error = prompter(gate), None
        except BaseException as exc:  # handed to the awaiting coroutine, not lost in the thread
            value, error = None, exc
        with contextlib.suppress(RuntimeError):  # the loop closed while the person was typing
            loop.call_soon_threadsafe(settle, value, error)

    threading.Thread(target=run, name=f"ask {gate.id}", daemon=True).start()
    return future


# ---- shared formatting -----------------------------------------------------------------------------


def choices(gate: Gate) -> list[str]:
    """The answers a gate takes; [] for free text."""
    return gate.choices or ([APPROVE, REJECT] if gate.kind == "approval" else [])


def gate_line(run_id: str, gate: Gate) -> str:
    given = choices(gate)
    shown = f" [{'/'.join(given)}]" if given else ""
    return f"? {gate.id}: {gate.prompt}{shown} — {how_to_answer(run_id, gate)}"


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat(timespec="seconds") if moment else None


def _when(iso: str | None) -> str:
    return iso.replace("T", " ").replace("+00:00", " UTC") if iso else ""
