"""A run's progress as events: what a snapshot of its state tells, in the order it happened.

Every event a state tells has an id that sorts as the events happened (the run's own clock, then
the kind, then the step or gate), so a follower that remembers the last id it saw resumes after it,
in this process or another, and is told nothing twice. What an agent has written so far comes from
the run's heartbeats and is told live only.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, TypeVar

from agentrun.client.models import (
    NoteDelivered,
    PartialOutput,
    QuestionAnswered,
    QuestionOpened,
    RunEnded,
    RunEvent,
    StepFinished,
    StepStarted,
)
from agentrun.models.calls import Partial
from agentrun.models.contract import RunState

# Of two events at the same moment (one workflow task of the run), the one that comes first: an
# answer lets a step finish, a finished step lets the next start, whose prompt carries a note, and
# a gate opens once the steps before it have started.
_RANK = {
    "question.answered": 0,
    "step.finished": 1,
    "step.started": 2,
    "note.delivered": 3,
    "question.opened": 4,
    "run.ended": 5,
}
_FINISHED = frozenset({"completed", "failed", "skipped", "cancelled"})
_EPOCH = datetime.min.replace(tzinfo=UTC)
E = TypeVar("E", StepStarted, StepFinished, QuestionOpened, QuestionAnswered, NoteDelivered, RunEnded)


def event_id(at: datetime | None, kind: str, name: str) -> str:
    """An id that sorts as the events happened: `<time> <rank> <kind> <name>`."""
    return f"{(at or _EPOCH).astimezone(UTC).isoformat(timespec='microseconds')} {_RANK[kind]} {kind} {name}"


def told(state: RunState, ended: bool) -> list[RunEvent]:
    """Every event `state` tells, in order; `ended`: the run has ended, so its end is one."""
    events: list[RunEvent] = [*_steps(state), *_gates(state), *_notes(state)]
    if ended:
        events.append(_event(RunEnded, state, state.ended_at, "", status=state.status, errors=state.errors))
    return sorted(events, key=lambda e: e.id)


def after(events: list[RunEvent], last: str | None) -> list[RunEvent]:
    """The events that come after the one with id `last` (all of them for None)."""
    return [e for e in events if last is None or e.id > last]


def partial(run_id: str, record: Partial) -> PartialOutput:
    return PartialOutput(
        id=f"partial {record.task} {record.chars}",
        run_id=run_id,
        step=record.task,
        agent=record.agent,
        tail=record.tail,
        chars=record.chars,
    )


def _event(kind: type[E], state: RunState, at: datetime | None, name: str, **fields: Any) -> E:
    """An event of `kind` at `at`, its id made from its kind's word and `name`."""
    word = kind.model_fields["kind"].default
    return kind(id=event_id(at, word, name), run_id=state.run_id, at=at, **fields)


def _steps(state: RunState) -> list[RunEvent]:
    out: list[RunEvent] = []
    for key, row in state.tasks.items():
        if row.started_at is None:
            continue
        name = f"{key}@{row.started_at.isoformat()}"
        out.append(_event(StepStarted, state, row.started_at, name, step=key, title=row.title, agent=row.agent))
        if row.status in _FINISHED and row.ended_at is not None:
            output = state.outputs.get(key, "")
            finished = {"status": row.status, "error": row.error, "duration_s": row.duration_s, "output": output}
            out.append(_event(StepFinished, state, row.ended_at, name, step=key, **finished))
    return out


def _gates(state: RunState) -> list[RunEvent]:
    out: list[RunEvent] = []
    for gate in state.gates.values():
        asked: dict[str, Any] = {"gate_kind": gate.kind, "prompt": gate.prompt, "choices": gate.choices}
        asked.update(step=gate.node, call=gate.call)
        out.append(_event(QuestionOpened, state, gate.opened_at, gate.id, gate=gate.id, **asked))
        answer = gate.answer
        if answer is not None:
            said = {"value": answer.value, "comment": answer.comment, "by": answer.by, "timed_out": answer.timed_out}
            out.append(_event(QuestionAnswered, state, answer.at, gate.id, gate=gate.id, **said))
    return out


def _notes(state: RunState) -> list[RunEvent]:
    """A note is told as delivered when the prompt that carried it was sent: its step's start."""
    out: list[RunEvent] = []
    for note in state.notes:
        if not note.delivered_to:
            continue
        row = state.tasks.get(note.delivered_to)
        at = row.started_at if row else None
        fields = {"n": note.n, "text": note.text, "by": note.by, "step": note.delivered_to}
        out.append(_event(NoteDelivered, state, at, str(note.n), **fields))
    return out
