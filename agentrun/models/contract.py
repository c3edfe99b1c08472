"""The contract between the client and the worker: what a run is given, what it reports, how
people talk to it (update and query names, their inputs), the search attributes it sets and the
task queue. Both sides import this module and nothing else of each other.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Literal, TypeVar, cast

from pydantic import BaseModel, Field, PrivateAttr, computed_field, model_validator
from temporalio.common import SearchAttributeKey

from agentrun.ids import GateId, NodeId, RunId
from agentrun.lang import blackboard, ir
from agentrun.lang.amounts import dollars as dollars
from agentrun.lang.amounts import limits_text as limits_text
from agentrun.lang.mcp_servers import McpServer
from agentrun.lang.render import to_text
from agentrun.models import calls, names
from agentrun.models.calls import Usage

WORKFLOW = "AgentRun"
BATCH_WORKFLOW = "AgentRunBatch"  # a batch of a long map's elements, a child workflow of its run
TASK_QUEUE = names.TASK_QUEUE
DEFAULT_MAX_ITERATIONS = 25

# Updates people (and tools) send a run, and the query that reads it.
ANSWER = "answer"  # AnswerInput -> Answer
RAISE_BUDGET = "raise_budget"  # BudgetInput -> Budget
ROLLBACK = "rollback_on_cancel"  # no argument: the cancellation that follows runs the compensations
STATE = "state"  # the query: RunState, without its step log
# The query asking whether a worker holds the run: its status, a few bytes. An answer or a note waits
# for this before it is sent; asking for the whole state instead made the worker store the state
# (a large value, outside history) once for every note sent.
HELD = "held"
STEP_LOG = "step_log"  # the query and memo key: the run's step log, which a fork reads
# Signals carrying the same answers, for when no worker may hold the run: they wait in its history,
# and the run checks them as the updates' validators do once a worker takes it.
SAY = "say"  # NoteInput -> Note: a person's note for the next prompt of a step (or of any step)
QUEUE_ANSWER = "queue_answer"  # AnswerInput
QUEUE_BUDGET = "queue_budget"  # BudgetInput
# A driven run (a behaviour tree the agent walks over MCP): the agent asks for each step and answers it.
NEXT_STEP = "next_step"  # no argument -> the step to do, or {status: done | failure | waiting}
EVAL = "eval"  # EvalInput -> {status: evaluation_passed | evaluation_failed, message}
SUBMIT = "submit"  # SubmitInput -> {status: step_complete | action_complete | action_failed | running, …}
THINK = "think"  # ThinkInput -> {status: recorded}
VAR_WRITE = "var_write"  # VarWriteInput -> {path, value}

RUN_BUDGET_GATE = "budget"  # the gate a paused run budget opens; a step budget opens budget:<step id>

# Search attributes, so people can filter runs in Temporal Web:
# `AgentRunWaitingFor="human_approval"` lists the runs waiting on a person.
SPEC = SearchAttributeKey.for_keyword("AgentRunSpec")
STATUS = SearchAttributeKey.for_keyword("AgentRunStatus")
WAITING_FOR = SearchAttributeKey.for_keyword("AgentRunWaitingFor")
# A fork's parent: `AgentRunParent="RUN"` lists the runs forked from RUN.
PARENT = SearchAttributeKey.for_keyword("AgentRunParent")
# Who started the run: "mcp" for a behaviour tree an agent drives through the MCP server, whose tools
# act on such runs only (`AgentRunStartedBy="mcp"` lists them). Kept in the memo too, for a server
# where search attributes cannot be registered.
STARTED_BY = SearchAttributeKey.for_keyword("AgentRunStartedBy")
STARTED_BY_MEMO = "started_by"
BY_MCP = "mcp"
SEARCH_ATTRIBUTES = (SPEC, STATUS, WAITING_FOR, PARENT, STARTED_BY)


# The memo key a fork carries its parent's run id under, from its start.
PARENT_MEMO = "parent"
PARAMS_MEMO = "params"  # the params a run was started with, in its details on Temporal Web


class StepRecord(BaseModel):
    """One finished run of a step (an agent task, a provider call, a question to people), as a
    fork takes it over instead of running it again.

    `round` counts the runs of the same run key (a loop's rounds, a retry's attempts) from 1;
    `began` is how many records had been written when it began, so a fork can tell which steps
    could not have read another's output (they began before it ended).
    """

    key: str  # the run key, as the report shows it: draft, score[3]
    node: str  # the plan node's id
    round: int = 1
    began: int = 0
    status: Literal["completed", "failed"] = "completed"
    value: Any = None  # what the step gave the nodes after it
    kept: bool = True  # False: the value was too large to keep, so a fork runs the step again
    error: str = ""
    writes: dict[str, Any] = {}  # blackboard paths it wrote ($VAR)


class NoteInput(BaseModel):
    text: str
    step: str = ""  # the step whose next prompt carries it; "" for the next prompt of any step
    by: str = ""


class Note(BaseModel):
    """A person's note to the run's agents, kept in the run state; `delivered_to` is the run key
    (step, element or round) whose prompt carried it, "" until then."""

    n: int
    text: str
    step: str = ""
    by: str = ""
    delivered_to: str = ""
    delivered_turn: int = 0  # the prompt of that run key that carried it, from 1
    handed_to: str = ""  # the batch (child workflow id) whose prompts may carry it; no other prompt does

    @property
    def sender(self) -> str:
        return self.by or "a person"

    def deliver(self, key: str, turn: int) -> None:
        """The prompt `turn` of run key `key` carries it."""
        self.delivered_to, self.delivered_turn = key, turn

    def hand_to(self, batch: str) -> None:
        self.handed_to = batch

    def came_back(self, said: Note) -> None:
        """What the batch it was handed to did with it (`said`, that batch's copy): delivered there
        is delivered here, and no batch holds it any more."""
        self.delivered_to, self.delivered_turn, self.handed_to = said.delivered_to, said.delivered_turn, ""

    def wait_again(self) -> None:
        """The batch it was handed to never gave it back: the next prompt may carry it."""
        self.handed_to = ""


class Fork(BaseModel):
    """What a forked run takes from the run it was forked from, and what it changes."""

    parent: str
    at: str  # the step it goes on from: its run key, with #N past its first round
    reuse: list[StepRecord] = []  # runs of steps taken over, not run again
    memory: dict[str, Any] = {}  # dotted memory paths set where the fork goes on (--set memory.KEY)
    changes: list[str] = []  # what was changed, in words, for the report
    notes: list[Note] = []  # people's notes it carries, to be delivered again (client.fork)


HISTORY_LIMIT = 8_000


class Carried(BaseModel):
    """What a run that continues as new takes into its next execution: its state, what finished
    nodes returned (workflows.journal), and the conversation and taint records the state lacks."""

    state: RunState
    journal: dict[str, Any] = {}
    transcripts: dict[str, list[calls.ChatMessage]] = {}
    turns: dict[str, int] = {}
    ran: dict[str, list[str]] = {}
    # What each compensation_stack entry runs (it is not sent with the state): the compensation
    # node's id, the map element indexes of its run key, the output it undoes.
    undos: list[tuple[str, list[int], Any]] = []
    rollback: bool = False  # a cancellation asked for before it continued undoes what it did


# An agent call's (and a model turn's, a provider call's) heartbeat timeout: a worker killed in the
# middle of one is noticed this soon and the call runs again on another worker. Its beats are not
# history; a shorter timeout would risk taking a worker whose event loop is merely slow for a dead
# one, and an agent call run twice costs a prompt.
DEFAULT_HEARTBEAT_S = 10.0


class RunInput(BaseModel):
    """What `client start` hands the AgentRun workflow."""

    plan: ir.Plan
    params: dict[str, Any] = {}
    workdir: str
    default_agent: str
    agents: dict[str, str] = {}  # agent id -> URI, overriding the default
    resume_from: NodeId | None = None
    max_iterations: int | None = None
    lenient: bool = False
    heartbeat_s: float = DEFAULT_HEARTBEAT_S
    search_attributes: bool = True
    prices: dict[str, ir.Price] = {}  # a price table from the command line; the spec's own wins
    # A behaviour tree the agent walks itself over MCP: no agent is asked, the run waits for updates.
    driven: bool = False
    trace_output: str = ""  # a driven run's address as the agent knows it
    fork: Fork | None = None  # a run forked from another: the steps it takes over
    # Events one execution's history may reach before the run continues as new (Temporal warns at
    # 10,240); None is HISTORY_LIMIT.
    history_limit: int | None = None
    carried: Carried | None = None  # set when the run continued as new: where it was
    parent_run: str = ""  # a subgraph's run: the run whose node started it as a child workflow
    # The MCP servers the run's tools may reach, by id: agentrun.yaml's and the spec's declarations.
    mcp_servers: dict[str, McpServer] = {}
    # The files the run was made from that lie in its work directory (the spec, what it includes,
    # its policy, agentrun.yaml), as paths from it: its agents' tools may not change them.
    steering_files: list[str] = []

    def agent_uri(self, agent_id: str) -> str:
        return self.agents.get(agent_id, self.default_agent)


class AnswerInput(BaseModel):
    gate: GateId
    value: str
    comment: str = ""
    by: str = ""
    # A tool call's gate: the digest of the arguments the person saw; another call's is refused.
    digest: str = ""


class EvalInput(BaseModel):
    result: bool
    note: str = ""


class SubmitInput(BaseModel):
    status: Literal["success", "failure", "running"]
    note: str = ""


class ThinkInput(BaseModel):
    thought: str


class VarWriteInput(BaseModel):
    path: str
    value: Any = None


Phase = Literal["idle", "protocol", "evaluating", "performing"]


class Drive(BaseModel):
    """Where the agent driving a run is: the phase machine of a behaviour tree's loop, and the step
    it was handed (its run key and cursor) while it works on it."""

    phase: Phase = "idle"
    protocol_accepted: bool = False
    protocol_rejected: bool = False
    current: str | None = None
    cursor: str = "null"
    finished: Literal["done", "failure"] | None = None

    def offer_protocol(self) -> None:
        self.phase, self.cursor = "protocol", "null"

    def settle_protocol(self, status: str) -> None:
        """The agent's answer to the protocol: success accepts it, failure rejects it."""
        self.protocol_accepted = status == "success"
        self.protocol_rejected = status == "failure"

    def hand_out(self, key: str, cursor: str, phase: Phase) -> None:
        """The step run as `key`, at `cursor`, is the agent's to answer."""
        self.current, self.cursor = key, cursor
        self.phase = phase

    def idle(self) -> None:
        self.phase, self.current, self.cursor = "idle", None, "null"

    def finish(self, outcome: str) -> None:
        """The tree ended with the run's `outcome`: next_step answers done, or failure for any other."""
        self.finished = "done" if outcome == "completed" else "failure"


class BudgetInput(BaseModel):
    gate: GateId = GateId(RUN_BUDGET_GATE)
    tokens: int | None = None
    usd: float | None = None
    iterations: int | None = None
    comment: str = ""
    by: str = ""


# not_taken: it failed where the spec routes a failure (a selector's next alternative, a skip or a
# fallback), so the run went on as its spec says (workflows.routing).
TaskStatus = Literal["pending", "running", "waiting", "completed", "failed", "not_taken", "skipped", "cancelled"]
RunStatus = names.RunStatus
TERMINAL = frozenset({"completed", "failed", "cancelled", "timeout", "compensated", "terminated"})
# The status lifecycle of seed 001; a terminal status only moves on to a rollback's outcome.
MOVES: dict[str, frozenset[str]] = {
    "pending": frozenset({"running", "cancelled", "failed"}),
    "running": frozenset({"waiting", "retrying", "completed", "failed", "cancelled", "timeout"}),
    "waiting": frozenset({"running", "retrying", "failed", "cancelled", "timeout"}),
    "retrying": frozenset({"running", "waiting", "failed", "cancelled", "timeout"}),
    "failed": frozenset({"compensated"}),
    "terminated": frozenset(),
    "completed": frozenset(),
    "cancelled": frozenset(),
    "timeout": frozenset(),
    "compensated": frozenset(),
}

# The memo and query carry outputs; keep each one well under Temporal's payload limits.
MAX_OUTPUT_CHARS = 64_000
VISITED_KEPT = 1000


class TaskState(BaseModel):
    id: str
    title: str = ""
    kind: str = "task"
    agent: str = ""
    status: TaskStatus = "pending"
    attempts: int = 0
    retries: int = 0  # node-level re-runs after a failure (the spec's retry policy)
    iterations: int = 0
    started_at: datetime | None = None
    ended_at: datetime | None = None
    duration_s: float = 0.0
    output_size: int = 0
    error: str = ""
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float = 0.0
    reused_from: str = ""  # the run whose recorded output a fork took over: nothing was spent here
    worker: str = ""  # the identity (pid@host) of the worker whose agent call answered last
    first_token_s: float | None = None  # from its first prompt to the first piece of the reply

    def run_by(self, agent: str) -> None:
        self.agent = agent

    def wait_for(self, agent: str) -> None:
        """The step waits on `agent` (people, for a question) rather than running."""
        self.status, self.agent = "waiting", agent

    def take_over(self, parent: str, agent: str) -> None:
        """The row stands for `parent`'s recorded run of the step, by `agent`: nothing ran here."""
        self.reused_from = parent
        self.agent = agent

    def start_attempt(self, attempt: int) -> None:
        """The step's `attempt`-th try at its success criteria, from 1."""
        self.attempts = attempt

    @property
    def retries_used(self) -> int:
        """Its tries after the first, of every kind: its success criteria's, the spec's retries, and
        its agent call's attempts after a transport error or a lost worker (`retries`)."""
        return max(self.attempts - 1, 0) + self.retries

    @property
    def attempts_made(self) -> int:
        """Its tries as its history has them (0 before it started): what `status` shows as attempts."""
        return self.retries_used + 1 if self.attempts or self.retries else 0

    def count_iteration(self) -> None:
        self.iterations += 1

    def asked(self, times: int) -> None:
        """A behaviour tree's step asked of its agent `times` times: each ask is an iteration."""
        self.iterations = times

    def mark(self, status: TaskStatus, error: str | None = None) -> None:
        """A new status, and a new error when one is given; None leaves the error as it was."""
        if error is None:
            self.status = status
        else:
            self.status, self.error = status, error

    def end_at(self, now: datetime) -> None:
        """The row ended at `now`, having run since it started."""
        self.ended_at = now
        self.duration_s = (self.ended_at - self.started_at).total_seconds() if self.started_at else 0.0

    def add_element(self, retries: int, output_size: int) -> None:
        """An element of a batched map, counted on the row that stands for them all."""
        self.retries += retries
        self.output_size += output_size


class Answer(BaseModel):
    value: str | None
    comment: str = ""
    by: str = ""
    at: datetime
    timed_out: bool = False


GateKind = Literal["question", "approval", "budget"]


class ToolAsk(BaseModel):
    """A tool call that waits for a person's approval (the policy's `ask`), as they see it: the
    step, the tool, its whole arguments (a write or edit also as a diff against the file as it was
    when the gate opened) and the agent's words before the call. Approving runs exactly these
    arguments, once: `digest` binds the answer to them."""

    step: str
    tool: str
    source: str = "builtin"
    call_id: str = ""
    arguments: str = ""  # the call's arguments as JSON, whole
    digest: str = ""  # sha256 of the tool and its arguments
    words: str = ""  # what the agent said before the call
    diff: str = ""  # a write or edit: the change to the file as it is now (unified diff)
    pattern: str = ""  # what the policy's ask matched: `approve-pattern` approves it for the rest of the run


class Gate(BaseModel):
    """A question a run put to people; open until answered or its timeout passes."""

    id: GateId  # the spec's gate id, with #N when the same gate is asked again (a loop's round N)
    name: str = ""  # the spec's gate id, as `human.<name>` reads the latest answer
    kind: GateKind = "question"
    prompt: str = ""
    choices: list[str] = []
    node: str = ""  # the node it belongs to or guards
    status: Literal["open", "answered", "timed_out"] = "open"
    opened_at: datetime | None = None
    timeout_at: datetime | None = None
    answer: Answer | None = None
    call: ToolAsk | None = None  # a tool call waiting for approval


# What a run waits on, in its memo, so `pending` and the inbox list every open question from the
# server's visibility store rather than asking each run (a run sets it when a gate opens or closes;
# a run started before has no such key, and only such a run is asked).
INBOX_MEMO = "inbox"
INBOX_PROMPT_CHARS = 4000  # a memo travels with every listing: a longer prompt is read from the run


class Inbox(BaseModel):
    """The open gates of a running run and the queued answers it refused for them, as its memo says."""

    spec: str = ""
    gates: list[Gate] = []
    refused: list[str] = []


def empty_inbox(spec: str) -> dict[str, Any]:
    """The inbox memo a run starts with: nothing open yet."""
    return {"spec": spec, "gates": [], "refused": []}


def inbox(state: RunState) -> dict[str, Any]:
    """The run's inbox memo: its open gates (prompts cut to INBOX_PROMPT_CHARS) and unsettled refusals."""
    gates = [_gate_memo(gate) for gate in open_gates(state)]
    return empty_inbox(state.spec) | {"gates": gates, "refused": [r.message for r in unsettled_refusals(state)]}


def _gate_memo(gate: Gate) -> dict[str, Any]:
    """An open gate as the memo keeps it: long texts cut (a tool call's digest stays whole, so an
    answer still binds to the whole arguments)."""
    shown = gate.model_dump(mode="json", exclude={"answer", "status"})
    shown["prompt"] = _cut(gate.prompt, INBOX_PROMPT_CHARS)
    if gate.call is not None:
        for field in ("arguments", "words", "diff"):
            shown["call"][field] = _cut(getattr(gate.call, field), INBOX_PROMPT_CHARS)
    return shown


def _cut(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: chars - 1] + "…"


class QueuedRefusal(BaseModel):
    """A queued answer or budget raise the run turned down when a worker took it."""

    gate: GateId
    message: str  # as in the run's warnings: queued answer to gate 'g' refused: <reason>
    at: datetime


class ModelUsage(BaseModel):
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, spent: ModelUsage) -> None:
        """Count what another run (a child, a batch) spent in this account."""
        self.calls += spent.calls
        self.input_tokens += spent.input_tokens
        self.output_tokens += spent.output_tokens
        self.cost_usd += spent.cost_usd

    def minus(self, before: ModelUsage) -> ModelUsage:
        """What was spent since `before`."""
        return ModelUsage(
            calls=self.calls - before.calls,
            input_tokens=self.input_tokens - before.input_tokens,
            output_tokens=self.output_tokens - before.output_tokens,
            cost_usd=self.cost_usd - before.cost_usd,
        )


class CompensationEntry(BaseModel):
    """seed 001's stack entry: which action it undoes and what will undo it. `undo` is what the
    workflow runs (the compensation node, its run key, the output it undoes); it is not sent."""

    action_id: str
    compensation_action: dict[str, Any]  # {type: agent | provider, payload: {...}}
    undo: Any = Field(default=None, exclude=True, repr=False)

    def restore(self, undo: Any) -> None:
        """What the entry runs, given back after a continue-as-new, which does not carry it."""
        self.undo = undo


class CompensationResult(BaseModel):
    action_id: str
    status: Literal["completed", "failed"]
    error: str = ""


class TaintMark(BaseModel):
    """Data that came from outside (a tool, a provider, the web), or was derived from such data."""

    source: str
    derived_from: list[str] = []


class Verdict(BaseModel):
    """A decision on one EXECUTE of a goal: its supervisor agent's, or a person's at its gate."""

    by: str  # "agent <id>" for a supervisor, else the person who answered ("" if unnamed)
    verdict: str  # CONTINUE, REORIENT, PAUSE; a person's may also be REJECT
    correction: str = ""
    reason: str = ""
    gate: str = ""  # the gate a person answered


class SupervisedAttempt(BaseModel):
    """One EXECUTE of a goal: its post-checkpoint, the flags RECONCILE raised, the verdicts on it."""

    post: dict[str, Any] = {}
    flags: list[str] = []
    verdicts: list[Verdict] = []

    def judged(self, verdict: Verdict) -> None:
        self.verdicts.append(verdict)


class GoalSupervision(BaseModel):
    """What a checkpoint goal committed to and how each attempt at it was judged."""

    supervision: ir.Supervision = "none"
    pre: dict[str, Any] = {}
    attempts: list[SupervisedAttempt] = []

    def commit(self, pre: dict[str, Any]) -> None:
        """The pre-checkpoint the goal committed to, which every attempt is reconciled with."""
        self.pre = pre

    def add_attempt(self, attempt: SupervisedAttempt) -> None:
        self.attempts.append(attempt)


class SpawnedAgent(BaseModel):
    """A sub-agent a goal's agent started with spawn_agents, counted under its parent."""

    key: str  # its own run key, PARENT/agent-N, which its activities carry
    role: str
    task: str
    status: Literal["running", "completed", "failed", "refused"] = "running"
    output: str = ""  # its reply (cut like a post-checkpoint's), or why it failed or was refused
    usage: Usage = Field(default_factory=Usage)

    def end(self, status: Literal["completed", "failed", "refused"], output: str, usage: Usage | None = None) -> None:
        """How it ended and what it said; `usage`, what its reply spent, when it replied at all."""
        if usage is not None:
            self.usage = usage
        self.status, self.output = status, output


class ToolUse(BaseModel):
    """One tool call a step's model made, as people see it: the tool, its arguments cut short, how
    it ended (ok; error: the tool's own, or it could not be run; refused: the policy said no) and
    why, and how long it took."""

    call_id: str
    tool: str
    arguments: str = ""  # the arguments' JSON, cut to ARGUMENTS_SHOWN characters
    # lost: it could not be completed (its workers kept stopping, or its time ran out); the step failed
    outcome: Literal["running", "ok", "error", "refused", "lost"] = "running"
    reason: str = ""  # the error or refusal, cut short
    duration_s: float = 0.0
    at: datetime | None = None  # when the call was made (workflow time)
    source: str = "builtin"  # builtin, mcp or local (answered by the workflow)
    attempts: int = 1  # more than 1: it ran again after the worker running it stopped

    def end(
        self, outcome: Literal["ok", "error", "refused", "lost"], reason: str, duration_s: float, attempts: int = 1
    ) -> None:
        self.outcome = outcome
        self.reason = reason
        self.duration_s = duration_s
        self.attempts = attempts


ARGUMENTS_SHOWN = 120  # characters of a tool call's arguments the run state keeps


class TraceEntry(BaseModel):
    """One answer to a behaviour tree's step, as its trace records it: the kind of step, where it
    was (the cursor the agent acted on), the action's name, what was submitted and what it did."""

    ts: datetime
    kind: str  # evaluate, instruct, protocol
    cursor: str
    name: str
    submitted: str  # true / false, success / failure / running, accept / reject
    outcome: str  # evaluation_passed, step_complete, action_failed, protocol_accepted, …
    note: str = ""


def element_key(map_key: str, index: int) -> str:
    """The run key of a map's element as people read it (`score[3]`), as workflows.scope.RunKey
    writes it."""
    return f"{map_key}[{index}]"


def batch_id(children: str, batch: int, part: int = 1) -> RunId:
    """The workflow id of a map's batch: `<run id>/<map key>/batch-<n>`; a batch a paused budget
    stopped goes on in part 2, 3, … (`batch-<n>.2`)."""
    return RunId(f"{children}/batch-{batch}" + (f".{part}" if part > 1 else ""))


class ElementNote(BaseModel):
    """One element of a batched map, as its batch reported it."""

    key: str
    status: TaskStatus = "pending"
    duration_s: float = 0.0
    retries: int = 0  # its attempts after the first, node-level and transport
    output_size: int = 0
    error: str = ""


class MapSummary(BaseModel):
    """A map whose list was longer than its batch: its elements ran in child workflows of `batch`
    elements each (ids from `batch_id(children, n)`), which keep every element's row and output.
    The run keeps this instead, whatever the list's length: counts by status, the first failures,
    the slowest elements."""

    key: str  # the map's run key
    row: str  # the one row in `tasks` that stands for all its elements
    run: int = 1  # which run of the map: a loop's next round or a retry runs it again
    total: int
    batch: int
    batches: int
    batches_done: int = 0
    children: str
    parts: dict[int, int] = {}  # batch -> child workflows it took, when a paused budget stopped it
    counts: dict[str, int] = {}  # elements by status
    failures: list[ElementNote] = []  # the first MAX_FAILURES that failed (skipped ones too)
    more_failures: int = 0
    slowest: list[ElementNote] = []  # the SLOWEST slowest, slowest first
    notes_dropped: int = 0  # warnings and errors of its elements not copied into the run's

    def count(self, note: ElementNote, max_failures: int, slowest: int) -> None:
        """An element that ran, no longer pending: counted by its status, kept among the first
        `max_failures` failures if it failed with an error, among the `slowest` if it completed."""
        counts = self.counts
        counts[note.status] = counts.get(note.status, 0) + 1
        counts["pending"] = counts.get("pending", 0) - 1
        if not counts["pending"]:
            del counts["pending"]
        if note.error and note.status in ("failed", "skipped"):
            if len(self.failures) < max_failures:
                self.failures.append(note)
            else:
                self.more_failures += 1
        if note.status == "completed":
            kept = sorted([*self.slowest, note], key=lambda n: -n.duration_s)
            self.slowest = kept[:slowest]

    def batch_done(self) -> None:
        self.batches_done += 1

    def split(self, batch: int, part: int) -> None:
        """A paused budget stopped `batch`: it goes on in child workflow `part`."""
        self.parts[batch] = part

    def drop_notes(self, count: int) -> None:
        """Warnings and errors of its elements the run does not copy: counted here only."""
        self.notes_dropped += count


class SupervisorChoice(BaseModel):
    """One decision of a graph's supervisor: which managed node it handed the work to, and why."""

    supervisor_id: str
    delegated_to: str
    reasoning: str = ""
    iteration: int = 0
    timestamp: datetime


class SubgraphRun(BaseModel):
    """A run of a graph node's subgraph: a child workflow of its own, with its own run id."""

    graph: str
    run_id: str
    status: str = "running"  # the child's run status once it ended
    error: str = ""

    def end(self, status: str, error: str | None = None) -> None:
        """The child's run status once it ended, and the error it failed with, when given."""
        self.status = status
        if error is not None:
            self.error = error


class InvalidTransition(RuntimeError):
    pass


class RunState(BaseModel):
    run_id: str = ""
    spec: str = ""
    dialect: str = ""
    traits: ir.Traits = ir.Traits()
    goal: str = ""
    constraints: list[str] = []
    status: RunStatus = "pending"
    current_task: str | None = None
    iteration_count: int = 0  # agent prompts sent so far
    retry_count: int = 0
    last_error: str = ""
    waiting_for: str | None = None  # human_approval, resource_limit (a budget paused the run)
    waiting_since: datetime | None = None
    waiting_timeout_at: datetime | None = None
    gates: dict[str, Gate] = {}  # by GateId
    human: dict[str, str | None] = {}  # gate id -> the answer, as templates read it
    approved_patterns: list[str] = []  # `tool pattern` a person approved for the rest of the run
    budget: ir.Budget | None = None  # the run's limits, as raised by people
    step_budgets: dict[str, ir.Budget] = {}
    total_cost_usd: float = 0.0
    usage_by_model: dict[str, ModelUsage] = {}
    visited_nodes: list[str] = []  # the last VISITED_KEPT, oldest first
    node_runs: dict[str, int] = {}  # how often each node ran (by run key), however long the run
    compensation_stack: list[CompensationEntry] = []
    compensations: list[CompensationResult] = []
    notes: list[Note] = []  # what people said to the run with `say`, in the order they said it
    taint: dict[str, TaintMark] = {}
    step_usage: dict[str, ModelUsage] = {}  # what each step with a budget has spent
    started_at: datetime | None = None
    ended_at: datetime | None = None
    tasks: dict[str, TaskState] = {}
    outputs: dict[str, str] = {}
    # Pipeline values later templates read: steps.<id>.output / .outputs, and store_as names.
    steps: dict[str, dict[str, Any]] = {}
    memory: dict[str, Any] = {}
    supervision: dict[str, GoalSupervision] = {}  # checkpoint goals by run key
    spawned: dict[str, list[SpawnedAgent]] = {}  # sub-agents by their parent's run key, in order
    tool_calls: dict[str, list[ToolUse]] = {}  # each step's tool calls by its run key, in order
    # By run key: the most tool results one request of the step cut to fit its model's context.
    context_cut: dict[str, int] = {}
    maps: dict[str, MapSummary] = {}  # batched maps by run key; their elements' rows are in the batches
    constants: dict[str, Any] = {}  # a behaviour tree's $CONST; its $VAR is `memory`
    trace: list[TraceEntry] = []  # a behaviour tree's answers, in order
    drive: Drive | None = None  # a driven run's phase machine
    supervisor_history: list[SupervisorChoice] = []  # a graph's supervisors' choices, in order
    executions: int = 1  # Temporal executions the run took: one more each time it continued as new
    subgraph_runs: dict[str, list[SubgraphRun]] = {}  # child runs by the run key of their subgraph node
    parent_run: str = ""  # set in a subgraph's run: the run it is part of
    # A subgraph's run that completed hands its parent what its compensation stack runs (each
    # entry's compensation node id, map element indexes and output), so the parent can undo it.
    compensation_undos: list[tuple[str, list[int], Any]] = []
    final_output: str = ""
    warnings: list[str] = []
    queued_refusals: list[QueuedRefusal] = []
    errors: list[str] = []
    usage: Usage = Field(default_factory=Usage)
    # Every finished run of a step, in the order they finished. It grows with the run, and only a
    # fork reads it: the state query, the memo's state and the run's result leave it out (`shown`).
    step_log: list[StepRecord] = []
    step_rounds: dict[str, int] = {}  # runs of each step begun so far, by run key: the next one's round
    parent: str = ""  # the run this one was forked from
    forked_at: str = ""  # the step it went on from
    reused_runs: int = 0  # runs of steps it took over from its parent
    fork_changes: list[str] = []
    _backoffs: int = PrivateAttr(0)  # branches sleeping before a retry

    @model_validator(mode="before")
    @classmethod
    def _recorded_traits(cls, data: Any) -> Any:
        return ir.recorded_traits(data)

    @computed_field
    @property
    def max_iterations(self) -> int | None:
        """The run budget's `iterations`: no prompt is sent past it."""
        return self.budget.iterations if self.budget else None

    @computed_field
    @property
    def total_tokens_used(self) -> int:
        return self.usage.input_tokens + self.usage.output_tokens

    def visit(self, key: str) -> None:
        self.node_runs[key] = self.node_runs.get(key, 0) + 1
        self.visited_nodes.append(key)
        if len(self.visited_nodes) > VISITED_KEPT:  # a loop of any length keeps the state small
            del self.visited_nodes[: len(self.visited_nodes) - VISITED_KEPT]

    def move(self, status: RunStatus) -> None:
        """Change status along the lifecycle; anything else is an engine bug, refused loudly."""
        if status != self.status and status not in MOVES[self.status]:
            raise InvalidTransition(f"a run cannot go from {self.status} to {status}")
        self.status = status

    def settle(self) -> None:
        """The status of a live run follows what it is doing: waiting on people, backing off, running."""
        if self.status in TERMINAL or self.status == "pending":
            return
        open_gates = sorted(
            (g for g in self.gates.values() if g.status == "open"), key=lambda g: g.opened_at or datetime.min
        )
        if open_gates:
            first = open_gates[0]
            self.waiting_for = "human_approval" if any(g.kind != "budget" for g in open_gates) else "resource_limit"
            self.waiting_since = first.opened_at
            timeouts = [g.timeout_at for g in open_gates if g.timeout_at]
            self.waiting_timeout_at = min(timeouts) if timeouts else None
        else:
            self.waiting_for = self.waiting_since = self.waiting_timeout_at = None
        self.move("waiting" if open_gates else "retrying" if self._backoffs else "running")

    def backing_off(self, delta: int) -> None:
        self._backoffs += delta
        self.settle()

    def begin(self, task_id: str, now: datetime) -> TaskState:
        task = _entry(self.tasks, task_id, lambda: TaskState(id=task_id))
        task.status, task.started_at, self.current_task = "running", now, task_id
        return task

    def finish(self, task_id: str, status: TaskStatus, now: datetime, output: str = "", error: str = "") -> None:
        task = self.tasks[task_id]
        task.status, task.ended_at = status, now
        if error or task.error:  # a new error, or an earlier attempt's to clear
            task.error = error
        task.duration_s = (now - task.started_at).total_seconds() if task.started_at else 0.0
        if status == "completed":
            task.output_size = len(output.encode())
            self.outputs[task_id] = output[:MAX_OUTPUT_CHARS]
            self.final_output = self.outputs[task_id]
        if error:
            self.errors.append(f"{task_id}: {error}")
        if self.current_task == task_id:
            self.current_task = None

    def run_usage(self) -> ModelUsage:
        return ModelUsage(
            calls=self.iteration_count,
            input_tokens=self.usage.input_tokens,
            output_tokens=self.usage.output_tokens,
            cost_usd=self.total_cost_usd,
        )

    def add_usage(self, task_id: str, usage: Usage, model: str, cost_usd: float, steps: list[str]) -> None:
        """Count a reply's tokens and cost for its task, its model, the run and each budgeted step."""
        accounts = [_entry(self.usage_by_model, model or "unknown", ModelUsage)]
        accounts += [_entry(self.step_usage, s, ModelUsage) for s in steps]
        for account in accounts:
            account.calls += 1
        # A command-line agent reports no tokens and no cost: each model field written costs a step
        # a pydantic __setattr__, for a sum that stays as it was.
        if usage.input_tokens or usage.output_tokens:
            for target in (self.tasks[task_id].usage, self.usage, *accounts):
                target.input_tokens += usage.input_tokens
                target.output_tokens += usage.output_tokens
        if cost_usd:
            for target in (self.tasks[task_id], *accounts):
                target.cost_usd += cost_usd
            self.total_cost_usd += cost_usd

    def shown(self) -> RunState:
        """The state as people read it: without the step log, which a fork reads apart (STEP_LOG)."""
        return self.model_copy(update={"step_log": []}) if self.step_log else self

    def keep(self, node_id: str, value: Any, *, step: bool, store_as: str | None, fields: Sequence[str] = ()) -> None:
        """The one place values later templates read are written: a pipeline step's
        `steps.<id>.output` / `.outputs`, the memory key a node stores its value under, and each
        of `fields` of an object value under its own name (a goal's `-> a, b`)."""
        if step:
            self.steps[node_id] = {"output": value, "outputs": value if isinstance(value, dict) else {}}
            self.final_output = to_text(value)[:MAX_OUTPUT_CHARS] if value is not None else ""
        if store_as:
            self.memory[store_as] = value
        if fields and isinstance(value, dict):
            given = cast(dict[str, Any], value)
            self.memory.update({name: given.get(name) for name in fields})

    def expand(self, template_id: str, rows: list[TaskState]) -> None:
        """Put one row per map element where the map body's row was, keeping the report's order."""
        tasks: dict[str, TaskState] = {}
        for key, task in self.tasks.items():
            if key == template_id:
                tasks.update({row.id: row for row in rows})
            else:
                tasks[key] = task
        self.tasks = tasks

    # What the workflow changes in a run's state, each change named for what it means: no workflow
    # module writes a field itself (tests/test_state_writes.py).

    def start(self, now: datetime) -> None:
        self.move("running")
        self.started_at = now

    def ended(self, now: datetime) -> None:
        self.ended_at = now

    def wind_up(self, now: datetime) -> None:
        """The run is over: nothing runs or waits any more, and a row still under way is cancelled."""
        self.ended_at, self.current_task = now, None
        self.waiting_for = self.waiting_since = self.waiting_timeout_at = None
        for task in self.tasks.values():
            if task.status in ("running", "waiting"):
                task.status = "cancelled"

    def forked_from(self, fork: Fork) -> None:
        """A fork names its parent and goes on with the parent's notes, none of them delivered here yet."""
        self.parent, self.forked_at, self.fork_changes = fork.parent, fork.at, fork.changes
        self.notes = [
            note.model_copy(update={"delivered_to": "", "delivered_turn": 0, "handed_to": ""}) for note in fork.notes
        ]

    def continued(self) -> None:
        self.executions += 1

    def warn(self, text: str) -> None:
        self.warnings.append(text)

    def record_error(self, text: str) -> None:
        self.errors.append(text)

    def failed_with(self, error: str) -> None:
        """The error that failed the run, once among its errors, and as its last."""
        if error not in self.errors:
            self.errors.append(error)
        self.last_error = error

    def set_last_error(self, error: str) -> None:
        self.last_error = error

    def refuse(self, gate: GateId, message: str, now: datetime) -> None:
        self.warnings.append(message)
        self.queued_refusals.append(QueuedRefusal(gate=gate, message=message, at=now))

    def give_output(self, text: str) -> None:
        self.final_output = text

    def keep_failed_output(self, task_id: str, text: str) -> None:
        """The reply that failed its checks, for the report."""
        self.outputs[task_id] = text[:MAX_OUTPUT_CHARS]

    def remember(self, key: str, value: Any) -> None:
        self.memory[key] = value

    def remember_default(self, key: str, value: Any) -> None:
        self.memory.setdefault(key, value)

    def blank(self, names: Sequence[str]) -> None:
        """Each of `names` in memory, its value dropped."""
        self.memory.update(dict.fromkeys(names))

    def write_var(self, path: str, value: Any) -> None:
        """A behaviour tree's $VAR write, on the blackboard (the run's memory)."""
        blackboard.write(self.memory, path, value)

    def hear(self, name: str, value: str | None) -> None:
        """The answer templates read as `human.<name>`."""
        self.human[name] = value

    def open_gate(self, gate: Gate) -> None:
        self.gates[gate.id] = gate

    def answer_gate(self, gate_id: str, answer: Answer) -> Answer:
        gate = self.gates[gate_id]
        gate.answer = answer
        gate.status = "answered"
        if gate.kind != "budget" and gate.call is None:
            self.human[gate.name] = answer.value  # templates read the latest answer
        return answer

    def time_out_gate(self, gate_id: str, value: str | None, now: datetime) -> None:
        gate = self.gates[gate_id]
        gate.status, gate.answer = "timed_out", Answer(value=value, at=now, timed_out=True)

    def raise_budget(self, step: str | None, budget: ir.Budget) -> None:
        """New limits a person gave: a step's, or the run's when `step` is None."""
        if step:
            self.step_budgets[step] = budget
        else:
            self.budget = budget

    def budget_step(self, step: str, budget: ir.Budget) -> None:
        """A step's budget as its spec gives it, unless a person raised it already."""
        self.step_budgets.setdefault(step, budget)

    def reset_step_usage(self, step: str) -> None:
        self.step_usage.pop(step, None)

    def count_prompt(self) -> None:
        self.iteration_count += 1

    def count_retries(self, task_id: str, times: int) -> None:
        task = self.tasks.get(task_id)
        if task is not None:
            task.retries += times
        self.retry_count += times

    def count_reused(self) -> None:
        self.reused_runs += 1

    def add_row(self, row: TaskState) -> None:
        self.tasks[row.id] = row

    def add_row_if_new(self, row: TaskState) -> TaskState:
        """The row under `row.id`: the one there already, else `row`."""
        return self.tasks.setdefault(row.id, row)

    def mark_row(self, task_id: str, status: TaskStatus, error: str | None = None) -> None:
        """The row's new status (and error, when given); a key with no row of its own has none to mark."""
        row = self.tasks.get(task_id)
        if row is not None:
            row.mark(status, error)

    def running_again(self, task_id: str) -> None:
        """A step runs itself: its row no longer shows a run taken over from a fork's parent."""
        row = self.tasks.get(task_id)
        if row is not None and row.reused_from:
            row.reused_from = ""

    def heard_from(self, task_id: str, worker: str, first_token_s: float | None) -> None:
        """Which worker answered a task's prompt last, and how soon its first reply came."""
        task = self.tasks.get(task_id)
        if task is not None and worker and task.worker != worker:
            task.worker = worker
        if task is not None and task.first_token_s is None and first_token_s is not None:
            task.first_token_s = first_token_s

    def not_taken(self, since: int) -> None:
        """The rows that failed since the run had `since` errors: not taken; their errors are no longer the run's."""
        recorded = set(self.errors[since:])
        for key, task in self.tasks.items():
            if task.status == "failed" and f"{key}: {task.error}" in recorded:
                task.status = "not_taken"
        del self.errors[since:]

    def mark(self, key: str, mark: TaintMark) -> None:
        self.taint[key] = mark

    def add_map(self, summary: MapSummary) -> None:
        self.maps[summary.key] = summary

    def add_spent(
        self,
        row: TaskState,
        prompts: int,
        retries: int,
        cost_usd: float,
        usage: Usage,
        by_model: dict[str, ModelUsage],
        by_step: dict[str, ModelUsage],
    ) -> None:
        """What work under `row` spent (a batch's elements, a subgraph's run), counted on the run and on the row."""
        self.iteration_count += prompts
        self.retry_count += retries
        self.total_cost_usd += cost_usd
        for target in (self.usage, row.usage):
            target.input_tokens += usage.input_tokens
            target.output_tokens += usage.output_tokens
        row.cost_usd += cost_usd
        for model, used in by_model.items():
            self.usage_by_model.setdefault(model, ModelUsage()).add(used)
        for step, used in by_step.items():
            self.step_usage.setdefault(step, ModelUsage()).add(used)

    def add_child_spent(self, task: TaskState, child: RunState, steps: Sequence[str]) -> None:
        """What a subgraph's run spent, counted on this run: its models, the node and its budgets;
        the node's iterations are the child's prompts."""
        by_step = {step: child.run_usage() for step in steps}
        self.add_spent(task, child.iteration_count, 0, child.total_cost_usd, child.usage, child.usage_by_model, by_step)
        task.iterations += child.iteration_count

    def add_subgraph_run(self, key: str, run: SubgraphRun) -> None:
        self.subgraph_runs.setdefault(key, []).append(run)

    def hand_undos(self, undos: list[tuple[str, list[int], Any]]) -> None:
        self.compensation_undos = undos

    def push_undo(self, entry: CompensationEntry) -> None:
        self.compensation_stack.append(entry)

    def pop_undo(self) -> CompensationEntry:
        return self.compensation_stack.pop()

    def add_compensation(self, result: CompensationResult) -> None:
        self.compensations.append(result)

    def add_note(self, note: Note) -> None:
        self.notes.append(note)

    def add_trace(self, entry: TraceEntry) -> None:
        self.trace.append(entry)

    def start_drive(self) -> Drive:
        """The driven run's phase machine: the one carried over, else a new one."""
        self.drive = self.drive or Drive()
        return self.drive

    def supervise(self, key: str, record: GoalSupervision) -> GoalSupervision:
        """A checkpoint goal's record: the one kept already, else `record`."""
        return self.supervision.setdefault(key, record)

    def add_spawned(self, key: str, agents: Sequence[SpawnedAgent]) -> None:
        self.spawned.setdefault(key, []).extend(agents)

    def record_tool_call(self, key: str, use: ToolUse) -> None:
        self.tool_calls.setdefault(key, []).append(use)

    def cut_to_fit(self, key: str, results: int) -> None:
        self.context_cut[key] = max(self.context_cut.get(key, 0), results)

    def add_supervisor_choice(self, choice: SupervisorChoice) -> None:
        self.supervisor_history.append(choice)

    def log_step(self, record: StepRecord) -> None:
        self.step_log.append(record)


_Entry = TypeVar("_Entry", bound=BaseModel)


def _entry(entries: dict[str, _Entry], key: str, make: Callable[[], _Entry]) -> _Entry:
    """`entries[key]`, made and added if missing. Not setdefault, which would build a model on every
    step only to drop it."""
    entry = entries.get(key)
    if entry is None:
        entry = entries[key] = make()
    return entry


def open_gates(state: RunState) -> list[Gate]:
    return [gate for gate in state.gates.values() if gate.status == "open"]


def unsettled_refusals(state: RunState) -> list[QueuedRefusal]:
    """Refused queued answers a person still has to act on: their gate is open, or is none of the run's."""
    return [r for r in state.queued_refusals if r.gate not in state.gates or state.gates[r.gate].status == "open"]


def task_rows(plan: ir.Plan) -> dict[str, TaskState]:
    """A row per step of the plan, none run yet: what a run starts with."""
    return {leaf.id: _row(leaf) for leaf in plan.leaves()}


def _row(node: ir.Task | ir.Provider | ir.Human) -> TaskState:
    if isinstance(node, ir.Provider):
        agent = node.call.provider
    else:
        agent = node.agent if isinstance(node, ir.Task) else "human"
    return TaskState(id=node.id, title=node.label, kind=node.kind, agent=agent)


# Carried names RunState, defined after RunInput.
Carried.model_rebuild()
RunInput.model_rebuild()
