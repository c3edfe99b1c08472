"""What the workflow sends to activities and gets back. Plain data, shared by both sides.

The workflow names activities by string (ACTIVITY_*), so it never imports activity code.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from agentrun.models.tools import ToolSpec

RUN_AGENT = "run_agent"
RELEASE_AGENT = "release_agent"
CHECK_CRITERIA = "check_criteria"
CALL_PROVIDER = "call_provider"
CHECK_PRECONDITIONS = "check_preconditions"
VALIDATE_OUTPUT = "validate_output"
SPAWN_AGENTS = "spawn_agents"  # the one function tool the engine offers a model


class Usage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0


class ToolCall(BaseModel):
    """A model asking for a function tool: the call's id in the conversation, the tool, and the
    arguments as the JSON text the model wrote."""

    id: str
    name: str
    arguments: str = "{}"


class ChatMessage(BaseModel):
    role: Literal["system", "user", "assistant", "tool"]
    content: str
    tool_calls: list[ToolCall] = []  # an assistant turn that asked for tools
    tool_call_id: str = ""  # a tool turn: the call it answers


class Entry(BaseModel):
    """One message of a conversation's log. A tool result the tool's activity kept in the store
    (ToolResult.kept) is named there, its content left empty here."""

    message: ChatMessage
    kept: str = ""


class Thread(BaseModel):
    """A conversation by reference: a log in the run's store, of which the first `length` messages
    were written by earlier turns, and the messages that follow them, which this turn writes at
    `length`, `length + 1`, … (a retried turn writes the same ones again at the same places)."""

    log: str
    length: int
    added: list[Entry] = []
    # The model is offered the tools the log's last turn offered (then `offered` is empty): the log keeps them.
    same_tools: bool = False


DEFAULT_AGENT_TIMEOUT_S = 1800.0  # a prompt's timeout when its node names none


class AgentCall(BaseModel):
    """One prompt to one agent."""

    run_id: str
    task_id: str
    agent_id: str
    uri: str
    # Empty when the transcript ends with tool results the model is to go on from.
    prompt: str
    workdir: str
    lifecycle: Literal["reuse", "refresh"] = "reuse"
    # Earlier turns of this conversation, for stateless protocols (openai) in reuse mode.
    transcript: list[ChatMessage] = []
    # How many prompts this task has sent before this one (scripted replies are indexed by it).
    turn: int = 0
    timeout_s: float = DEFAULT_AGENT_TIMEOUT_S
    tools: list[str] = []  # function tools offered to a chat model, by name (SPAWN_AGENTS)
    offered: list[ToolSpec] = []  # the tools its spec grants, as the model is offered them
    # The tools its spec grants in a coding agent's own names (Claude Code's --allowedTools).
    allowed_tools: list[str] = []
    temperature: float | None = None  # the agent's sampling temperature, for a model that takes one
    # The transcript by reference (then `transcript` is empty): what history keeps of a turn stays
    # the same size however long the conversation has grown.
    thread: Thread | None = None
    # The tokens a request may hold (the agent's max_context_tokens); None: its model family's, if known.
    max_context_tokens: int | None = None


class AgentReply(BaseModel):
    text: str
    tool_calls: list[ToolCall] = []  # what the model asked for instead of, or beside, its text
    usage: Usage = Field(default_factory=Usage)
    model: str = ""
    attempt: int = 1  # the activity attempt that answered: more than 1 after transport retries
    stderr: str = ""  # what a local agent printed besides its reply (its last 2000 characters), for `logs`
    worker: str = ""  # the identity (pid@host) of the worker that asked the agent, for `status` and `report`
    first_token_s: float | None = None  # seconds from the prompt to the first piece of the reply
    cut: int = 0  # the oldest tool results cut to their head to fit the model's context in this request


PARTIAL_CHARS = 2000  # how much of a reply so far a heartbeat carries: its end


class Partial(BaseModel):
    """What a running agent call has written so far: its activity's heartbeat details, so small
    that the last one (kept in history when the attempt fails or times out) costs little."""

    task: str
    agent: str
    attempt: int = 1
    tail: str = ""  # the last PARTIAL_CHARS characters of the reply so far
    chars: int = 0  # characters of the reply so far
    tokens: int = 0  # output tokens so far: the model's count once it gives one, else chunks received
    elapsed_s: float = 0.0  # since the prompt was sent, when this was recorded
    quiet_s: float = 0.0  # since the agent last wrote anything (or since the prompt), likewise
    status: str = "waiting"  # waiting (nothing yet), writing, or the agent's own (agentapi: running)
    first_token_s: float | None = None


class CriteriaCall(BaseModel):
    task_id: str
    workdir: str
    spec_dir: str
    python: str | None = None
    script: str | None = None
    timeout_s: float = 120.0
    # What agents and people wrote (memory keys, steps, answers), handed to the check as data in
    # the JSON file $AGENTRUN_VALUES names, never spliced into its code.
    values: dict[str, Any] = {}


class CheckResult(BaseModel):
    ok: bool
    error: str = ""
    warnings: list[str] = []


class ProviderCall(BaseModel):
    task_id: str
    workdir: str
    provider: str
    method: str
    params: dict[str, Any] = {}
    output_file: str | None = None


class ProviderResult(BaseModel):
    text: str


class PreconditionCall(BaseModel):
    task_id: str
    workdir: str
    spec_dir: str
    files_exist: list[str] = []
    min_count: int = 1
    sync_targets: list[str] = []


class ValidateCall(BaseModel):
    """An agent's reply and what its spec expects of it."""

    task_id: str
    text: str
    format: Literal["text", "json", "markdown"] = "text"
    json_schema: dict[str, Any] | None = None
    rules: list[str] = []


class ValidateResult(BaseModel):
    ok: bool
    value: Any = None  # the parsed JSON for format json, else the text
    errors: list[str] = []
    unchecked: list[str] = []  # rules of no known form, for the agent's model to judge
