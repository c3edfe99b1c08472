"""What the pages show, read from Temporal with the code the CLI uses: the open questions with their
context, the list of runs, one run's flowchart, steps and report, and one step's output."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentrun.client.engine import Engine
from agentrun.client.models import OpenGate
from agentrun.errors import UsageError
from agentrun.explain import flowchart, gates, graph, report, status
from agentrun.lang import ir
from agentrun.models import run_words
from agentrun.models.calls import Partial
from agentrun.models.contract import TERMINAL, Gate, RunState, TaskState, dollars, open_gates
from agentrun.models.names import RunStatus
from agentrun.models.texts.checkpoint_text import SUPERVISE_GATE
from agentrun.ui import markdown


@dataclass
class Question:
    """An open gate with what a person needs to answer it."""

    run_id: str
    spec: str
    gate: Gate
    choices: list[str]
    draft: str  # what an approval guards: the output of its step, when there is one
    spent: str  # for a paused budget: what the run has used so far
    corrects: bool  # a supervised goal's gate: an answer other than approve or reject is a correction

    @property
    def key(self) -> str:
        return f"{self.run_id}/{self.gate.id}"


def questions_of(state: RunState) -> list[Question]:
    return [_card(state.run_id, state.spec, gate, state) for gate in open_gates(state)]


def _card(run_id: str, spec: str, gate: Gate, state: RunState | None) -> Question:
    """A gate's card; what only the run's state says (the draft, the spending) when it was read."""
    if state and gate.id in state.gates:
        gate = state.gates[gate.id]  # its whole prompt: the memo's may be cut
    return Question(
        run_id=run_id,
        spec=spec,
        gate=gate,
        choices=gates.choices(gate),
        draft=state.outputs.get(gate.node, "") if state and gate.kind == "approval" and gate.call is None else "",
        spent=_spent(state) if state and gate.kind == "budget" else "",
        corrects=gate.kind == "approval" and gate.name.endswith(SUPERVISE_GATE),
    )


INBOX_PAGE = 50  # the waiting runs the inbox shows, the latest started; only they are asked for more


@dataclass
class Inbox:
    questions: list[Question]
    more: int  # waiting runs beyond the page


async def inbox(engine: Engine) -> Inbox:
    """The newest open questions across runs, from the runs' memos; only the runs shown are asked
    for what their cards show beyond the question (a draft, what a budget has used)."""
    shown = await _newest(engine)
    states = await engine.states(sorted({g.run_id for g in shown}))
    cards = [_card(g.run_id, g.spec, g.gate, states.get(g.run_id)) for g in shown]
    runs = len({g.run_id for g in shown})
    more = await engine.count_waiting() - runs if runs >= INBOX_PAGE else 0
    return Inbox(questions=cards, more=max(0, more))


async def inbox_keys(engine: Engine) -> list[str]:
    """The keys of the cards the inbox shows now (no run is asked)."""
    return sorted(f"{g.run_id}/{g.gate.id}" for g in await _newest(engine))


async def _newest(engine: Engine) -> list[OpenGate]:
    """The open gates of the INBOX_PAGE waiting runs started last, newest question first."""
    found = await engine.open_gates(INBOX_PAGE)
    return sorted(found, key=lambda g: g.gate.opened_at.isoformat() if g.gate.opened_at else "", reverse=True)


def _spent(state: RunState) -> str:
    return f"used {state.total_tokens_used} tokens, {dollars(state.total_cost_usd)}, {state.iteration_count} prompts"


async def runs(engine: Engine, status_filter: RunStatus | None, spec: str | None, limit: int) -> list[dict[str, Any]]:
    """The runs `list` shows for the same filters, newest first."""
    return [run.row() for run in await engine.runs(status_filter, spec, limit)]


@dataclass
class StepRow:
    """One step on the run page, as the report's table and `status` give it."""

    key: str
    title: str
    agent: str
    status: str  # the step's status, a class on the row
    word: str  # what the row says of it
    started: str  # HH:MM:SS UTC
    took: str
    worker: str
    so_far: str  # a running step's reply so far, as `status` shows it
    has_output: bool


@dataclass
class Live:
    """What an open run page refreshes: the run's word, its steps, what `status` says after them,
    and the plan's flowchart with each step's state."""

    state: RunState
    word: str
    steps: list[StepRow]
    notes: list[str]
    chart: str

    @property
    def ended(self) -> bool:
        return self.state.status in TERMINAL


@dataclass
class RunPage:
    """A run's page: what refreshes while it is open, and what is read once."""

    live: Live
    plan: str  # the plan drawn as `inspect` draws it, for whoever reads text
    report: str  # `report`'s markdown as HTML, escaped
    web: str | None  # the run on Temporal Web
    questions: list[Question]
    build: str | None = None  # the worker build the run is pinned to, where workers are versioned

    @property
    def state(self) -> RunState:
        return self.live.state

    @property
    def ended(self) -> bool:
        return self.live.ended


async def run_page(engine: Engine, run_id: str) -> RunPage:
    plan = await engine.run(run_id).plan()
    live = await live_view(engine, run_id, plan)
    return RunPage(
        live=live,
        plan=graph.draw(plan) if plan else "(the run's plan cannot be read)",
        report=markdown.to_html(report.to_markdown(live.state)),
        web=engine.web_url(run_id),
        questions=questions_of(live.state),
        build=await engine.run(run_id).build(),
    )


async def live_view(engine: Engine, run_id: str, plan: ir.Plan | None) -> Live:
    """The run's state now, its steps with what running ones have written so far, and its chart."""
    progress = await engine.run(run_id).progress()
    state, so_far = progress.state, progress.so_far
    chart = flowchart.with_states(flowchart.flowchart(plan), plan, state) if plan else ""
    return Live(
        state=state,
        word=run_words.word(state.status),
        steps=[_row(state, task, so_far.get(task.id)) for task in state.tasks.values()],
        notes=[line.strip() for line in status.notes(state)],
        chart=chart,
    )


def _row(state: RunState, task: TaskState, record: Partial | None) -> StepRow:
    return StepRow(
        key=task.id,
        title=task.title if task.title != task.id else "",
        agent=task.agent,
        status=task.status,
        word=run_words.step_word(task.status),
        started=f"{task.started_at:%H:%M:%S}" if task.started_at else "",
        took=f"{task.duration_s:.1f}s" if task.started_at else "",
        worker=task.worker,
        so_far=status.so_far_line(record) if record is not None and task.status == "running" else "",
        has_output=task.id in state.outputs or record is not None,
    )


@dataclass
class StepPage:
    """One step's output, or what its agent has written so far."""

    run_id: str
    row: StepRow
    output: str | None  # the whole output, once the step has one
    tail: str  # the end of the reply so far, while it runs


async def step_page(engine: Engine, run_id: str, key: str) -> StepPage:
    """UsageError when the run has no step `key`."""
    progress = await engine.run(run_id).progress()
    state = progress.state
    task = state.tasks.get(key)
    if task is None:
        raise UsageError(f"run {run_id} has no step '{key}'")
    record = progress.so_far.get(key) if task.status == "running" else None
    return StepPage(
        run_id=run_id,
        row=_row(state, task, record),
        output=state.outputs.get(key),
        tail=record.tail if record is not None else "",
    )
