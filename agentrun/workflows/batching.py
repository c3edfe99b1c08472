"""What passes between a run and the child workflows that run a long map's elements in batches: a
batch's input (its elements and what their templates read of the run) and what comes back (the
results in the elements' order, a short note per element, what they spent)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from agentrun.lang import expressions, ir
from agentrun.lang.render import TemplateSyntaxError, names_used
from agentrun.models.calls import ChatMessage, Usage
from agentrun.models.contract import ElementNote, ModelUsage, Note, RunInput, TaintMark, TaskState
from agentrun.workflows.scope import RunKey
from agentrun.workflows.taint import strings

MAX_NOTES = 20  # warnings and errors a batch hands back; its own state keeps them all
# How a batch fails: an element failed (the map fails with it), or its results do not fit in a payload.
ELEMENT_FAILED, BATCH_TOO_BIG = "ElementFailed", "BatchTooBig"


class Spent(BaseModel):
    """What a batch's elements spent, to be counted in the run's totals and budgets."""

    prompts: int = 0
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float = 0.0
    by_model: dict[str, ModelUsage] = {}
    by_step: dict[str, ModelUsage] = {}  # the budgeted steps the map runs under
    retries: int = 0


class BatchInput(BaseModel):
    """One batch: the run's input (its plan cut down to the map's body), which elements, and what
    the run held when the batch started that the elements read or are counted against."""

    run: RunInput
    run_id: str  # the run's: templates and agents see the run, not the batch
    map_id: str
    map_elements: list[int] = []  # the map's own indexes, inside another map
    batch: int
    part: int = 1
    indexes: list[int]
    items: list[Any]
    total: int
    concurrency: int
    best_effort: bool = False  # a failed element is recorded and the others go on
    outcomes: bool = False  # each element's input is the map's input with its task context (a graph's map)
    values: dict[str, Any] = {}  # the map's template values (a loop's iteration, an outer item)
    derived_from: list[str] = []
    budgets: list[str] = []
    memory: dict[str, Any] = {}
    steps: dict[str, dict[str, Any]] = {}
    human: dict[str, str | None] = {}
    taint: dict[str, TaintMark] = {}
    budget: ir.Budget | None = None
    step_budgets: dict[str, ir.Budget] = {}
    spent: ModelUsage = Field(default_factory=ModelUsage)  # the run's, so a budget counts what came before the batch
    step_usage: dict[str, ModelUsage] = {}
    transcripts: dict[str, list[ChatMessage]] = {}  # the body's agents' conversations (chat APIs, reuse)
    notes: list[Note] = []  # people's notes waiting when the batch started, for its elements' prompts

    @property
    def key(self) -> RunKey:
        """The map's run key, inside any maps around it."""
        return RunKey(self.map_id, tuple(self.map_elements))


class BatchResult(BaseModel):
    results: list[Any] = []  # by position in the batch's `indexes`; None for an element not run
    notes: list[ElementNote] = []  # likewise
    deferred: list[int] = []  # element indexes left for the run: a budget it must pause on was reached
    failed: ElementNote | None = None  # the element whose failure failed the batch
    cancelled: bool = False
    spent: Spent = Field(default_factory=Spent)
    warnings: list[str] = []
    errors: list[str] = []
    dropped: int = 0  # warnings and errors past MAX_NOTES
    said: list[Note] = []  # the notes it was handed, each delivered by one of its prompts or not
    tainted_count: int = 0  # elements whose output is marked as from outside (workflows.taint)
    taint_source: str = ""  # the first one's source
    taint_from: list[str] = []  # the marked run values they read, the first MAX_NOTES


def element_rows(body: ir.NodeBase, key: RunKey, indexes: Iterable[int]) -> list[TaskState]:
    """A row per element of a map, as the report lists them: `score[3]`, "Score #4"."""
    return [TaskState(id=str(key.element(i)), title=f"{body.label} #{i + 1}", kind=body.kind) for i in indexes]


def steps_read(over: str) -> list[str]:
    """The steps whose output the list expression `over` reads (its elements derive from them)."""
    paths = expressions.references(over) if over else []
    return [str(p[1]) for p in paths if len(p) > 1 and p[0] == "steps"]


def element_input(outcomes: bool, given: Any, item: Any, index: int, total: int) -> Any:
    """An element's input: its item, or (a graph's map) the map's input with the item's task context."""
    if not outcomes:
        return item
    return {**(given if isinstance(given, dict) else {}), "map_item": item, "map_index": index, "map_total": total}


class BudgetReached(BaseException):
    """A batch's element would go past a budget that pauses: the element stops there, unasked, and
    is handed back to the run, which pauses (and asks a person) as it would before a prompt.

    Not an Exception: no node's failure policy (retry, skip, fallback) may take it for a failure."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Reads:
    """The step ids, params (`inputs.X`) and top-level names a map's body reads; None where it may
    read any."""

    steps: frozenset[str] | None
    inputs: frozenset[str] | None
    names: frozenset[str] | None

    def pick_steps(self, steps: dict[str, Any]) -> dict[str, Any]:
        return _pick(steps, self.steps)

    def pick_memory(self, memory: dict[str, Any]) -> dict[str, Any]:
        return _pick(memory, self.names)

    def pick_params(self, params: dict[str, Any]) -> dict[str, Any]:
        """A param is read bare (`{{topic}}`) or as `inputs.topic`."""
        if self.inputs is None or self.names is None:
            return dict(params)
        return _pick(params, self.inputs | self.names)


def _pick(values: dict[str, Any], names: frozenset[str] | None) -> dict[str, Any]:
    return dict(values) if names is None else {k: v for k, v in values.items() if k in names}


EVERYTHING = Reads(None, None, None)


def reads(body: ir.NodeBase) -> Reads:
    """What of the run's values the body's templates read, so a batch is sent only those (the list
    being mapped over, a step's output or a param, would otherwise go to every batch)."""
    steps: set[str] = set()
    inputs: set[str] = set()
    names: set[str] = set()
    for node in ir.walk(body):
        templates = _templates(node)
        if templates is None:
            return EVERYTHING
        for template in templates:
            try:
                paths = [path for path, _ in expressions.template_references(template)]
                used = names_used(template)
            except (expressions.ExpressionError, TemplateSyntaxError):
                return EVERYTHING
            for path in paths:
                if path[0] in ("steps", "inputs") and len(path) < 2:
                    return EVERYTHING  # the whole mapping: a loop over it, steps[x]
                if path[0] in ("steps", "inputs"):
                    (steps if path[0] == "steps" else inputs).add(str(path[1]))
            names |= used
    return Reads(frozenset(steps), frozenset(inputs), frozenset(names))


def _templates(node: ir.NodeBase) -> list[str] | None:
    """The templates of a node whose reads are known from them alone; None for one that may read
    anything (all prior context, a success check, a protocol that quotes the memory, other kinds)."""
    if isinstance(node, ir.Task):
        if node.protocol != "plain" or node.input == ir.ALL_PRIOR or node.criteria:
            return None
        return [t for t in (node.prompt, node.system, node.input) if t]
    if isinstance(node, ir.Provider):
        return None if node.criteria else strings(node.call.params)
    if isinstance(node, (ir.Sequence, ir.Parallel, ir.Selector)):
        return []
    return None
