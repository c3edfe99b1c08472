"""The IR every dialect compiles to: a Plan holding a tree of nodes.

The Plan is the workflow input and never changes during a run, so everything here is plain data.
`line` on a node points back into the spec file for error messages and reports.
"""

# Each node class narrows `kind` to its Literal, the tag pydantic's discriminated union reads;
# NodeBase types it `str` for code that walks any node. Pyright calls a narrowed mutable field an
# incompatible override, which these tags are not (no code assigns a node's kind).
# pyright: reportIncompatibleVariableOverride=false
from __future__ import annotations

import functools
import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentrun.lang.mcp_servers import McpServer

OnFailure = Literal["abort", "skip", "fallback"]
OutputFormat = Literal["text", "json", "markdown"]
# evaluate / instruct: a behaviour tree's steps, answered with a JSON verdict or status (workflows.protocols.tree).
Protocol = Literal["status", "plain", "checkpoint", "evaluate", "instruct"]
# How much a goal of an Agentfile is watched: its phases are COMMIT → EXECUTE, then for a supervised
# goal RECONCILE and, when that raised flags, SUPERVISE; for `human`, SUPERVISE always and a person.
Supervision = Literal["none", "supervised", "human"]


class Model(BaseModel):
    # Schemas are built on first use, so the spec commands do not pay for all the node kinds'
    # recursive union at import; `build_models()` builds them all where runs are served.
    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)


class Retry(Model):
    """Node-level attempts; transport errors are retried separately by the activity retry policy.

    The wait before attempt n grows with n (`counts: attempts`: linear delay × n, exponential
    delay × 2^n), or with the retry's own number r = n - 1 (`counts: retries`, cycgraph's schedule:
    the first retry waits delay, linear delay × r, exponential delay × 2^(r-1)); never past `max_delay_s`.
    """

    attempts: int = 1
    backoff: Literal["none", "linear", "exponential"] = "none"
    delay_s: float = 1.0
    counts: Literal["attempts", "retries"] = "attempts"
    max_delay_s: float | None = None


class Criteria(Model):
    """A success check run after a task: inline python that sets `result`, or a script path."""

    python: str | None = None
    script: str | None = None
    max_retries: int = 0
    retry_message: str | None = None
    timeout_s: float = 120.0


class ProviderSpec(Model):
    provider: str
    method: str
    params: dict[str, Any] = {}
    output_file: str | None = None


class Preconditions(Model):
    files_exist: list[str] = []
    min_count: int = 1
    sync_targets: list[str] = []


class LoopUntil(Model):
    status: str
    message: str = ""
    max_iterations: int | None = None
    max_iterations_param: str | None = None  # the param that gives the limit at run time (WITHIN $n)


class TreeStep(Model):
    """Where a behaviour tree's step sits: its action's name, the child indexes from the root to the
    action, the step's index in the action (from 0) and whether it is the action's last step."""

    action: str
    path: list[int] = []
    index: int = 0
    last: bool = True

    @property
    def cursor(self) -> str:
        """The step's place as a behaviour tree's trace writes it."""
        return json.dumps({"path": self.path, "step": self.index}, separators=(",", ":"))


class Running(Model):
    """How an instruct step answered `running` is asked again: after `wait_s`, the wait doubling up
    to `max_wait_s`, and failed once it has been asked `max_asks` times in all."""

    wait_s: float = 30.0
    max_wait_s: float = 600.0
    max_asks: int = 20


class Budget(Model):
    """Limits on what a run (or one step) may spend; checked before each prompt is sent."""

    tokens: int | None = None
    usd: float | None = None
    iterations: int | None = None  # agent prompts sent (seed 001's max_iterations)
    on_exceeded: Literal["fail", "pause"] = "fail"
    # Tokens a prompt reserves while it runs beside others under this budget (else the largest seen).
    reserve_tokens: int | None = None


class Price(Model):
    """US dollars per million tokens of one model."""

    input: float
    output: float


class NodeBase(Model):
    kind: str  # each kind's model fixes it to its own name
    id: str
    title: str = ""
    line: int = 0
    timeout_s: float | None = None
    retry: Retry = Field(default_factory=Retry)
    on_failure: OnFailure = "abort"
    fallback: Node | None = None  # runs with the same input when this node fails for good
    # Undoes this node's effect, rendered with its output as `output`; pushed on the
    # compensation stack once the node succeeds, run last-in first-out when the run fails.
    compensation: Node | None = None
    gate: Human | None = None  # a person answers before the node runs (approval: true, human:)
    budget: Budget | None = None  # what the node and everything under it may spend
    # Files copied in and checked for before the node (and everything under it) runs.
    preconditions: Preconditions | None = None
    output_key: str | None = None
    # A pipeline step: its value is kept as `steps.<id>.output` (and under `store_as`) for later templates.
    step: bool = False
    store_as: str | None = None

    @property
    def label(self) -> str:
        return self.title or self.id


class McpGrant(Model):
    """Tools of one MCP server an agent may call: the server's id as declared, and the tools by
    name (none named: every tool the server lists)."""

    server: str
    tools: list[str] = []


class ToolGrant(Model):
    """What a task's agent may call, by where each call is answered: a built-in tool (an activity
    under the run's policy), an MCP server's tool, or a tool the workflow answers itself."""

    builtin: list[str] = []  # names of lang.tools.BUILTINS
    mcp: list[McpGrant] = []
    local: list[str] = []  # names of lang.tools.LOCAL
    max_calls: int = 50  # tool calls one prompt's answer may make; one more fails the step

    @property
    def empty(self) -> bool:
        return not (self.builtin or self.mcp or self.local)


class Task(NodeBase):
    """One agent prompt, optionally looped until a status and checked by success criteria.

    protocol "status": the agent ends replies with COMPLETION_STATUS (task trees).
    protocol "plain": any non-empty reply is the output (pipelines); `input` is a template whose
    value the prompt reads as `{{ input }}`, or gets appended as context when it does not.
    protocol "checkpoint": an Agentfile goal. The agent first commits to a plan (a pre-checkpoint),
    then works and reports (a post-checkpoint); `supervision` says what is checked after that.
    With `outputs` the work is a JSON object with those fields, each stored as a memory key.
    With `loop_until` (CONVERGE) the work repeats, each round seeing the last output, until the
    reply says the status word, at most `max_iterations` rounds (or the param `max_iterations_param`).
    """

    kind: Literal["task"] = "task"
    agent: str = "default"
    prompt: str = ""
    system: str | None = None
    protocol: Protocol = "status"
    input: str | None = None
    tools: list[str] = []  # the names the spec wrote, as shown by inspect
    grant: ToolGrant | None = None  # the tools its agent is offered; None: none (nor any asked for)
    output_format: OutputFormat = "text"
    output_schema: dict[str, Any] | None = None
    rules: list[str] = []
    loop_until: LoopUntil | None = None
    criteria: Criteria | None = None
    outputs: list[str] = []
    supervision: Supervision = "none"
    spawn: bool = False  # the agent may start sub-agents (spawn_agents), one level deep
    tree_step: TreeStep | None = None  # a behaviour tree's evaluate or instruct step


class Provider(NodeBase):
    """A deterministic call to a registered provider; no completion detection."""

    kind: Literal["provider"] = "provider"
    call: ProviderSpec
    criteria: Criteria | None = None  # checked after the call, which runs again while it fails


class Sequence(NodeBase):
    kind: Literal["sequence"] = "sequence"
    children: list[Node] = []


class Parallel(NodeBase):
    """Run children together; done when `wait` is met (all, any, or a count), the rest cancelled."""

    kind: Literal["parallel"] = "parallel"
    children: list[Node] = []
    wait: Literal["all", "any"] | int = "all"


class Selector(NodeBase):
    """Try children in order; the first that succeeds wins."""

    kind: Literal["selector"] = "selector"
    children: list[Node] = []


class Case(Model):
    when: str
    node: Node


class Switch(NodeBase):
    kind: Literal["switch"] = "switch"
    cases: list[Case] = []
    default: Node | None = None


class Loop(NodeBase):
    """Repeat `body` until a condition holds or a validator passes; at most `max_iterations`."""

    kind: Literal["loop"] = "loop"
    body: Node
    until: str | None = None
    validator: Node | None = None
    feedback: str | None = None  # a reference into the validator's output, e.g. {{steps.ID.output.feedback}}
    max_iterations: int = 10


# Elements a map runs in its own workflow history; a longer list runs in batches of this many, each
# a child workflow, so that no history holds more than a batch's events (Temporal warns at 10,240).
MAP_BATCH = 100
MAX_MAP_BATCH = 500  # a batch's own history stays far below the warning however its elements retry


class Map(NodeBase):
    """`body` once per item of a list: the value of the expression `over`, the fixed `items`, or
    what the JSON path `items_path` finds in the map's input (a graph's view of memory), at most
    `max_items` of them. With `fail_fast` the first failed item fails the map and cancels the rest;
    with `best_effort` failures are recorded and the rest go on. With `outcomes` the value is
    {results: [{index, value}], errors: [{index, error}]} instead of the list of values, and each
    item's input is the map's own input with map_item, map_index and map_total added (a graph's
    map, as cycgraph gives its workers their task context)."""

    kind: Literal["map"] = "map"
    over: str = ""
    items: list[Any] | None = None
    items_path: str = ""
    max_items: int | None = None
    body: Node
    concurrency: int = 20
    reduce: Node | None = None
    batch: int = MAP_BATCH
    error_strategy: Literal["fail_fast", "best_effort"] = "fail_fast"
    outcomes: bool = False


class Human(NodeBase):
    """A person answers; the run waits durably (no activity open) until they do or `timeout_s` passes.

    The node's id is the gate id people answer with. Its value is the answer, also read as
    `human.<id>`. An approval gate's choices are approve and reject; a rejection fails the run,
    skips the node the gate guards (`skip`), or is only recorded (`continue`) for later routing.
    `on_timeout` is fail, continue (the value is null) or one of the choices, taken as the answer.
    """

    kind: Literal["human"] = "human"
    prompt: str
    choices: list[str] = []
    approval: bool = False
    on_timeout: str = "fail"
    on_reject: Literal["fail", "skip", "continue"] = "fail"


class Evaluate(NodeBase):
    """A precondition: the run continues only when `condition` holds."""

    kind: Literal["evaluate"] = "evaluate"
    condition: str


class Subflow(NodeBase):
    """One of the plan's `subgraphs` run as a child workflow of its own (the same workflow type, a
    plan made of the subgraph): its memory starts as `input_mapping` says (parent key -> child
    key), and `output_mapping` (child key -> parent key) brings its results back. What it did that
    has an undo joins the parent's compensation stack once it succeeds; a child that fails undoes
    its own work first."""

    kind: Literal["subflow"] = "subflow"
    graph: str
    input_mapping: dict[str, str] = {}
    output_mapping: dict[str, str] = {}
    max_steps: int | None = None  # the child graph's node runs, if not its own max_iterations


class Edge(Model):
    source: str
    target: str
    when: str | None = None
    line: int = 0


class Access(Model):
    """What one node of a graph reads from memory and where its value goes.

    It sees only `read_keys` (`*` for all); its value is written to `write_key`, and a JSON object
    it returns may also write any of `write_keys` by name (nothing else). An approval rejected goes
    to `on_reject` when it names a node.
    """

    read_keys: list[str] = ["*"]
    write_keys: list[str] = []
    write_key: str | None = None
    on_reject: str | None = None


class Graph(NodeBase):
    """Named nodes joined by edges tried in order, the first whose condition holds taken; cycles
    allowed, at most `max_steps` node runs. A node with no edge that holds ends the graph when it
    is one of `end_nodes`, else fails it; a supervisor ends it by choosing `DONE`."""

    kind: Literal["graph"] = "graph"
    nodes: dict[str, Node] = {}
    edges: list[Edge] = []
    start: str
    max_steps: int = 50
    end_nodes: list[str] = []
    access: dict[str, Access] = {}
    outputs: list[str] = []  # the memory keys it declares as its result
    # A condition reading a key whose value came from outside (a tool, the web) is false.
    strict_taint: bool = False


class Supervisor(NodeBase):
    """An agent picks which of `managed` runs next, or `DONE` to finish, with its reasons; it
    chooses at most `max_iterations` times in a run."""

    kind: Literal["supervisor"] = "supervisor"
    agent: str = "default"
    prompt: str = ""
    system: str | None = None
    managed: list[str] = []
    max_iterations: int = 10


VerifierMode = Literal["llm_judge", "expression", "jsonpath"]
PathCheck = Literal["exists", "equals", "matches", "gt", "gte", "lt", "lte"]


class Verifier(NodeBase):
    """Checks the work so far: an agent's score against `pass_threshold`, an expression, or a
    JSON path into memory compared by `check`. Its value is {passed, score?, reason}; with
    `throw_on_fail` a failed check fails the node."""

    kind: Literal["verifier"] = "verifier"
    mode: VerifierMode = "expression"
    agent: str = "default"
    prompt: str = ""
    system: str | None = None
    pass_threshold: float = 0.7
    expression: str = ""
    path: str = ""
    check: PathCheck = "exists"
    expected: Any = None
    throw_on_fail: bool = False
    # The memory key a JSON path reads into, and the one key a judge is shown; None: all it reads.
    target_key: str | None = None


VotingStrategy = Literal["majority_vote", "weighted_vote", "llm_judge"]


class Voting(NodeBase):
    """Voter agents answer in parallel; their votes are tallied (the most votes, or the most weight
    by voter agent id), or a judge agent picks the winner. Fewer than `quorum` valid votes fails the
    node. Its value is {winner, tally, votes, strategy}."""

    kind: Literal["voting"] = "voting"
    voters: list[Task] = []
    strategy: VotingStrategy = "majority_vote"
    weights: dict[str, float] = {}
    quorum: int | None = None
    judge: Task | None = None
    vote_key: str = "vote"  # the field of a voter's JSON reply that is its vote


class Supervised(NodeBase):
    """The COMMIT / EXECUTE / RECONCILE / SUPERVISE wrapper around a body."""

    kind: Literal["supervised"] = "supervised"
    body: Node
    human: bool = False


Node = Annotated[
    Task
    | Provider
    | Sequence
    | Parallel
    | Selector
    | Switch
    | Loop
    | Map
    | Human
    | Evaluate
    | Subflow
    | Graph
    | Supervisor
    | Verifier
    | Voting
    | Supervised,
    Field(discriminator="kind"),
]

# Kinds in the IR that no engine handler runs yet; `spec.check` refuses a Plan using one. Every
# other kind has a handler in `workflows.nodes` (tests/test_node_kinds.py keeps the two in step).
NOT_RUNNABLE_YET = frozenset({"supervised"})
DONE = "__done__"  # what a supervisor answers to finish
APPROVE, REJECT = "approve", "reject"
APPROVE_PATTERN = "approve-pattern"  # a tool call approved, and every later one its ask pattern matches

# A task `input` that stands for every earlier step's output.
ALL_PRIOR = "all prior context"


class Param(Model):
    name: str
    type: str = "string"
    required: bool = False
    default: Any = None
    description: str = ""
    examples: list[Any] = []
    line: int = 0
    json_schema: dict[str, Any] | None = None  # a value given is checked against it before the run


class AgentInfo(Model):
    """An agent a spec declares by id (a pipeline's agents:, an Agentfile's AGENT), for inspect and
    the graph; `requires` is the capability an Agentfile agent asks for (REQUIRES), which picks its
    URI from `capabilities:` in agentrun.yaml when no --agent names one."""

    name: str = ""
    role: str = ""
    tools: list[str] = []
    requires: str = ""
    uri: str = ""  # the agent the spec names for it (a cycgraph bundle's model), used when nothing else does
    # Sent with every prompt to this agent: the system text as the system message (ahead of the
    # prompt for agents without one), the temperature in the request of a model that takes one.
    system: str = ""
    temperature: float | None = None
    max_context_tokens: int | None = None  # the tokens a request may hold; None: its model family's


class Traits(Model):
    """What a language's plans are like, recorded by its compiler: the client and the workflows read
    these, never a language's name, so a new language is a package of its own and one registry line."""

    # Every node is a step of its own: drawn whole with each node's marks, in the tree's words; an
    # agent may drive it over MCP.
    tree: bool = False
    # Memory is $VAR values beside read-only $CONST ones: inspect and the report show both, and a
    # fork's --set may not write a constant.
    blackboard: bool = False
    # The report counts each node's runs and shows the supervisors' choices and the memory at the end.
    state_graph: bool = False
    # The root's children are the steps the graph numbers 1, 2, 3 (a pipeline's steps, RUN's goals).
    numbered_steps: bool = False
    # How a step stores a value later steps read, for the hint when a run keeps none.
    stores_with: str = "a step that stores its value"


class Plan(Model):
    name: str
    description: str = ""
    dialect: str  # the language's name, shown to people; code reads `traits`
    traits: Traits = Field(default_factory=Traits)
    source: str
    spec_dir: str
    params: dict[str, Param] = {}
    root: Node
    lifecycle: Literal["reuse", "refresh"] = "reuse"
    timeout_s: float | None = None  # the whole run; past it running agents are cancelled
    goal: str = ""
    constraints: list[str] = []
    budget: Budget | None = None
    prices: dict[str, Price] = {}  # by model name, as the agent's replies report it
    version: str = ""
    agents: dict[str, AgentInfo] = {}  # declared agents by id; empty where a dialect declares none
    # Graphs a cycgraph bundle carries for its subgraph nodes, by graph id, checked like the main one.
    subgraphs: dict[str, Graph] = {}
    # A task tree's `completion: lenient` takes replies without a completion status.
    completion: Literal["strict", "lenient"] = "strict"
    # A template name no value was given for: an error, or empty as in plain Jinja (task trees).
    undefined: Literal["error", "empty"] = "error"
    # A pipeline's conditional branches: the step a condition runs -> the conditional step.
    branches: dict[str, str] = {}
    # Said by validate, start and dry-run, with file:line; nothing stops for them.
    warnings: list[str] = []
    # An Agentfile's SECURITY: paranoid hands every agent and provider output to later prompts as
    # untrusted data; research puts `research_scope` in every system prompt.
    security: Literal["default", "paranoid", "research"] = "default"
    research_scope: str = ""
    # A behaviour tree's blackboard: `memory` seeds the run's memory ($VAR, $LOCAL); `constants` are
    # read-only ($CONST, $GLOBAL); `running` paces the asks of a step the agent says is still running.
    memory: dict[str, Any] = {}
    constants: dict[str, Any] = {}
    running: Running = Field(default_factory=Running)
    # The policy.toml every tool call of the run answers to (its tables as TOML reads them), and the
    # file it came from; None: the built-in defaults.
    tool_policy: dict[str, Any] | None = None
    policy_file: str = ""
    # Every file the spec was made from (itself, what it includes or $refs, its policy, agent.toml,
    # prompt and skill files, success-check scripts), by real path: no agent of its runs changes them.
    files: list[str] = []
    # MCP servers the spec itself declares (an Agentfile's agent.toml), by id; agentrun.yaml's are
    # added when a run starts, the spec's winning.
    mcp_servers: dict[str, McpServer] = {}
    # cyberian keys the engine shows but does not act on.
    requires_workdir: Any = None
    requirements: Any = None

    @model_validator(mode="before")
    @classmethod
    def _untyped_info(cls, data: Any) -> Any:
        """Plans recorded in older histories carry these fields in one `info` mapping."""
        if isinstance(data, dict) and "info" in data:
            info = data.get("info") or {}
            data = {k: v for k, v in data.items() if k != "info"}
            data.update({k: v for k, v in info.items() if k in cls.model_fields and k not in data})
        return recorded_traits(data)

    @property
    def order(self) -> list[str]:
        """The ids of the root's children: a pipeline's steps in the order they run."""
        return [child.id for child in getattr(self.root, "children", [])]

    def walk(self) -> list[NodeBase]:
        """Every node, depth first, in execution order."""
        return list(_walk(self.root))

    def walk_all(self) -> list[NodeBase]:
        """Every node of the plan and of its subgraphs, which run as child workflows."""
        return [n for graph in self.subgraphs.values() for n in _walk(graph)] + self.walk()

    def leaves(self) -> list[Task | Provider | Human]:
        """The nodes that do the work: agent prompts, provider calls and questions to people."""
        return [n for n in self.walk() if isinstance(n, (Task, Provider, Human))]

    def gates(self) -> list[Human]:
        """Every question a run may ask a person: human nodes and the gates before other nodes."""
        return [n for n in self.walk() if isinstance(n, Human)] + [n.gate for n in self.walk() if n.gate]


def walk(node: NodeBase) -> list[NodeBase]:
    """`node` and every node under it, depth first."""
    return list(_walk(node))


def _walk(node: NodeBase):
    yield node
    for child in children_of(node):
        yield from _walk(child)


def children_of(node: NodeBase) -> list[Any]:
    """The nodes directly under `node`, its fallback included."""
    return _own_children(node) + ([node.fallback] if node.fallback else [])


def _own_children(node: NodeBase) -> list[Any]:
    if isinstance(node, (Sequence, Parallel, Selector)):
        return list(node.children)
    if isinstance(node, Switch):
        return [c.node for c in node.cases] + ([node.default] if node.default else [])
    if isinstance(node, Voting):
        return [*node.voters, *([node.judge] if node.judge else [])]
    if isinstance(node, (Loop, Map, Supervised)):
        extra = [getattr(node, "validator", None), getattr(node, "reduce", None)]
        return [node.body] + [n for n in extra if n is not None]
    if isinstance(node, Graph):
        return list(node.nodes.values())
    return []


@functools.cache  # once a process: `start` builds them before the contract, the interpreter again on import
def build_models() -> None:
    """Build every IR model's validator and serializer now. The workflows' interpreter calls it: pydantic-core,
    serialising a model it finds where the type is not declared (an `Any` field, an update's result),
    takes that class's serializer as it is and fails on the deferred placeholder ("'MockValSer'
    object is not an instance of 'SchemaSerializer'"); a budget raise did, and failed its workflow
    task. Building only the models such values are known to be was tried and left: 100 ms saved
    is not worth a run stuck on a model no test serialised that way."""
    for model in _MODELS:
        model.model_rebuild(force=True)


_MODELS: tuple[type[BaseModel], ...] = (
    Retry,
    Criteria,
    ProviderSpec,
    Preconditions,
    LoopUntil,
    TreeStep,
    Running,
    Budget,
    Price,
    Edge,
    Access,
    Param,
    AgentInfo,
    Traits,
    NodeBase,
    Sequence,
    Parallel,
    Selector,
    Case,
    Switch,
    Loop,
    Map,
    Subflow,
    Graph,
    Supervisor,
    Verifier,
    Voting,
    Supervised,
    Task,
    Provider,
    Human,
    Evaluate,
    Plan,
)


def recorded_traits(data: Any) -> Any:
    """A plan or run state recorded before languages recorded their traits gets its language's."""
    if isinstance(data, dict) and "traits" not in data and data.get("dialect") in RECORDED_TRAITS:
        data = {**data, "traits": RECORDED_TRAITS[data["dialect"]]}
    return data


# The traits of the languages that had runs before traits were recorded, for those runs: read inside
# workflows, where importing the languages themselves is not allowed. tests/test_dialects.py keeps
# each equal to its language's TRAITS.
RECORDED_TRAITS = {
    "agentfile": Traits(numbered_steps=True, stores_with="a goal's outputs (`-> NAME`)"),
    "task-tree": Traits(stores_with="a task's `store_as: NAME`"),
    "pipeline": Traits(numbered_steps=True, stores_with="a step's `output: {store_as: NAME}`"),
    "behavior_tree": Traits(tree=True, blackboard=True),
    "cycgraph": Traits(state_graph=True, stores_with="a node's write_keys"),
}
