"""The values the public API returns besides the run contract's own (RunState, Answer, Note): a
run as a listing shows it, a finished run's result, and the events a run's progress is told in."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from agentrun.models.calls import Partial
from agentrun.models.contract import RunState


class RunSummary(BaseModel):
    """One run of a listing, newest first: what `list` prints."""

    run_id: str
    status: str
    spec: str = ""
    started: datetime | None = None
    ended: datetime | None = None


class Progress(BaseModel):
    """A run now: its state and, for each agent call under way, what the agent has written so far
    (by the step's run key)."""

    state: RunState
    so_far: dict[str, Partial] = {}


class RunResult(BaseModel):
    """A run that has ended: its status, what it gave, and its whole state."""

    run_id: str
    status: str
    final_output: str = ""
    outputs: dict[str, str] = {}
    errors: list[str] = []
    state: RunState

    @property
    def completed(self) -> bool:
        return self.status == "completed"


class _Event(BaseModel):
    """What every event carries: its id, which `Run.events(after=…)` resumes after; the run; when it
    happened (the run's own clock, which orders events)."""

    id: str
    run_id: str
    at: datetime | None = None


class StepStarted(_Event):
    kind: Literal["step.started"] = "step.started"
    step: str  # the run key: draft, score[3]
    title: str = ""
    agent: str = ""


class StepFinished(_Event):
    kind: Literal["step.finished"] = "step.finished"
    step: str
    status: str  # completed, failed, skipped, cancelled
    error: str = ""
    duration_s: float = 0.0
    output: str = ""  # the step's output as the run keeps it (cut past contract.MAX_OUTPUT_CHARS)


class PartialOutput(_Event):
    """What an agent has written so far: told while the run goes on, and not again on a resume."""

    kind: Literal["step.output"] = "step.output"
    step: str
    agent: str = ""
    tail: str = ""  # the last characters of the reply so far
    chars: int = 0


class QuestionOpened(_Event):
    kind: Literal["question.opened"] = "question.opened"
    gate: str
    gate_kind: str = "question"  # question, approval, budget
    prompt: str = ""
    choices: list[str] = []
    step: str = ""


class QuestionAnswered(_Event):
    kind: Literal["question.answered"] = "question.answered"
    gate: str
    value: str | None = None
    comment: str = ""
    by: str = ""
    timed_out: bool = False


class NoteDelivered(_Event):
    kind: Literal["note.delivered"] = "note.delivered"
    n: int
    text: str
    by: str = ""
    step: str = ""  # the run key whose prompt carried it


class RunEnded(_Event):
    kind: Literal["run.ended"] = "run.ended"
    status: str
    errors: list[str] = []


RunEvent = Annotated[
    StepStarted | StepFinished | PartialOutput | QuestionOpened | QuestionAnswered | NoteDelivered | RunEnded,
    Field(discriminator="kind"),
]
