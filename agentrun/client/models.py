"""The values the public API returns besides the run contract's own (RunState, Answer, Note): a
run as a listing shows it, a finished run's result, and the events a run's progress is told in."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentrun.lang.ir import Budget
from agentrun.models.calls import Partial
from agentrun.models.contract import Answer, Gate, GateKind, RunInput, RunState, ToolAsk
from agentrun.models.names import RunStatus

# How a step that ended did: the statuses of a step row (contract.TaskStatus) a StepFinished carries.
StepEnd = Literal["completed", "failed", "skipped", "cancelled"]


class _Value(BaseModel):
    # Built on first use: `start` imports the API on its way to the first prompt, and building these
    # schemas (the run's state and input among them) when the module loads cost it ≈ 16 ms.
    model_config = ConfigDict(defer_build=True)


class RunSummary(_Value):
    """One run of a listing, newest first: what `list` prints."""

    run_id: str
    status: str
    spec: str = ""
    started: datetime | None = None
    ended: datetime | None = None
    build: str = ""  # the worker build the run is pinned to, where workers are versioned

    def row(self) -> dict[str, str]:
        """The run as `list --json` prints it and the runs page shows it (`build` where it has one)."""
        row = {
            "run_id": self.run_id,
            "status": self.status,
            "spec": self.spec,
            "started": _iso(self.started) or "",
            "ended": _iso(self.ended) or "",
        }
        return {**row, "build": self.build} if self.build else row


class Progress(_Value):
    """A run now: its state and, for each agent call under way, what the agent has written so far
    (by the step's run key)."""

    state: RunState
    so_far: dict[str, Partial] = {}


class RunResult(_Value):
    """A run that has ended: its status, what it gave, and its whole state."""

    run_id: str
    status: RunStatus
    final_output: str = ""
    outputs: dict[str, str] = {}
    errors: list[str] = []
    state: RunState

    @property
    def completed(self) -> bool:
        return self.status == "completed"


class RunInfo(_Value):
    """Where a run is, as Temporal tells it: whether it still runs, and the task queue it waits on."""

    run_id: str
    running: bool
    task_queue: str


class Look(_Value):
    """A running run's state if a worker answered for it now, and whether a live worker polls its queue."""

    state: RunState | None
    polled: bool


class UnderWay(_Value):
    """What a run's activities are doing now: each agent's reply so far (by the step's run key), and
    retries not told of yet."""

    so_far: dict[str, Partial] = {}
    retries: list[Retry] = []


class Retry(_Value):
    """An agent call or another activity Temporal is retrying: its last failure and when it tries again."""

    activity_id: str
    activity: str  # run_agent, run_tool, …
    attempt: int  # the attempt under way or next: 2 for the first retry
    task: str = ""  # the step's run key, where the call's input names it
    agent: str = ""
    why: str = ""
    maximum_attempts: int = 0  # 0: no limit
    retry_in_s: float | None = None


class Said(_Value):
    """One thing in an agent conversation, from the run's history."""

    at: datetime
    task: str
    agent: str  # the agent's id; the tool's name for a tool call and its result
    kind: Literal["prompt", "reply", "failed", "tool", "result"]
    text: str
    stderr: str = ""


class Question(_Value):
    """An open gate of a running run, as `pending` lists it (`gate` is None for a run no worker holds,
    whose question cannot be read now: `prompt` then says how to get one)."""

    run_id: str
    spec: str
    gate: str | None
    kind: str | None
    prompt: str
    choices: list[str] = []
    waiting_since: str | None = None  # ISO 8601, to the second
    timeout_at: str | None = None
    call: ToolAsk | None = None  # a tool call the policy's `ask` holds: its tool, arguments, diff and digest


class OpenGate(_Value):
    """An open gate of a running run, as the run's memo in Temporal's visibility store says it."""

    run_id: str
    spec: str
    gate: Gate


class Unanswered(_Value):
    """A running run no worker holds now; `waiting` when it said, last time a worker held it, that it
    waits for a person; `fix` how to get a worker to it."""

    run_id: str
    spec: str
    waiting: bool
    fix: str


class Pending(_Value):
    """What people are asked across runs: every open gate (oldest first), the runs whose questions
    cannot be read, and answers queued earlier that a run refused while its gate is still open."""

    questions: list[Question] = []
    unanswered: list[Unanswered] = []
    refused: list[tuple[str, str]] = []  # (run id, why)
    more: int = 0  # waiting runs beyond the limit asked for (the latest started are listed)


class Answered(Answer):
    """An answer a run took, and the gate it answered."""

    model_config = ConfigDict(defer_build=True)

    gate: str


class Limits(_Value):
    """What a person raises a paused budget to, and says with it."""

    tokens: int | None = None
    usd: float | None = None
    iterations: int | None = None
    comment: str = ""
    by: str = ""


class Raised(_Value):
    """A budget a run raised, and which one (`budget`, or `budget:STEP` for a step's)."""

    gate: str
    budget: Budget


class ForkPlan(_Value):
    """A fork ready to start: its input, the task queue it goes on, and what to tell the person."""

    input: RunInput
    task_queue: str
    notes: list[str] = []  # about the step chosen to go on from
    warnings: list[str] = []  # about changes that may not do what was meant


class _Event(_Value):
    """What every event carries: its id, which `Run.events(after=…)` resumes after; the run; when it
    happened (the run's own clock, which orders events)."""

    id: str
    run_id: str
    at: datetime | None = None


class StepStarted(_Event):
    """A step began: its run key (`draft`, `score[3]` for a map's element), its title and agent."""

    kind: Literal["step.started"] = "step.started"
    step: str  # the run key: draft, score[3]
    title: str = ""
    agent: str = ""


class StepFinished(_Event):
    """A step ended: how (`status`), its error if it failed, how long it took and its output."""

    kind: Literal["step.finished"] = "step.finished"
    step: str
    status: StepEnd
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
    """The run asks a person: `gate` is what `Run.answer(gate=…)` names; `gate_kind` is a question
    (free text or `choices`), an approval (approve/reject, with `call` for a tool call the policy
    asks about) or a budget (raise it or stop); `step` is the step it stands before."""

    kind: Literal["question.opened"] = "question.opened"
    gate: str
    gate_kind: GateKind = "question"
    prompt: str = ""
    choices: list[str] = []
    step: str = ""
    call: ToolAsk | None = None  # a tool call waiting for approval (the policy's `ask`)


class QuestionAnswered(_Event):
    """A question was answered: the value, the comment, who answered, or that its time ran out."""

    kind: Literal["question.answered"] = "question.answered"
    gate: str
    value: str | None = None
    comment: str = ""
    by: str = ""
    timed_out: bool = False


class NoteDelivered(_Event):
    """A note (`Run.say`) reached an agent: the `n`th, in the prompt of the step `step`."""

    kind: Literal["note.delivered"] = "note.delivered"
    n: int
    text: str
    by: str = ""
    step: str = ""  # the run key whose prompt carried it


class RunEnded(_Event):
    """The run ended: its status (completed, failed, cancelled, timeout, compensated, terminated) and
    its errors. The last event a run tells."""

    kind: Literal["run.ended"] = "run.ended"
    status: RunStatus
    errors: list[str] = []


RunEvent = Annotated[
    StepStarted | StepFinished | PartialOutput | QuestionOpened | QuestionAnswered | NoteDelivered | RunEnded,
    Field(discriminator="kind"),
]


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat(timespec="seconds") if moment else None
