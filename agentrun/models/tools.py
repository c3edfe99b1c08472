"""What a tool call carries across the wire: the tools a model is offered, a call it makes, the
policy the call is checked against, and the result the model reads.

The workflow names the activity by RUN_TOOL and never imports activity code. A refused call or a
tool's own error is a ToolResult the model reads (ok=False), not an exception: the step goes on.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from agentrun.lang.protected import SECRET_NAMES, STEERING_NAMES
from agentrun.lang.tool_names import BUILTIN_TOOLS, PIPELINE_NAMES, builtin_name, nearest_tool_name
from agentrun.models.builtin_tools import BUILTINS

__all__ = [
    "BUILTIN_TOOLS",
    "PIPELINE_NAMES",
    "PREVIEW_TOOL",
    "RUN_TOOL",
    "McpPolicy",
    "ToolCall",
    "ToolCallInput",
    "ToolLimits",
    "ToolPolicy",
    "ToolResult",
    "ToolRule",
    "ToolSpec",
    "builtin_name",
    "builtin_specs",
    "nearest_tool_name",
]

RUN_TOOL = "run_tool"
PREVIEW_TOOL = "preview_tool"  # a write or edit as a diff, for the person who approves it

# Files a tool never writes or edits, wherever they are (by name, in any case; globs): the secret
# ones are not read or listed either (agentrun.lang.protected).
PROTECTED_FILES = STEERING_NAMES + SECRET_NAMES


class ToolSpec(BaseModel):
    """A tool as a model is offered it: its name, what it does, its arguments as JSON Schema."""

    name: str
    description: str
    parameters: dict[str, Any]


class ToolCall(BaseModel):
    """A model asking for one tool: the model's own id for the call, the tool, its arguments."""

    id: str
    name: str
    arguments: dict[str, Any] = {}


class ToolRule(BaseModel):
    """One tool's table in policy.toml (`[read]`, `[bash]`, ...), as the Agentfile's real system
    reads it. A tool with a table is enabled unless it says `enabled = false`."""

    enabled: bool = True
    allow: list[str] = []  # path globs ($WORKSPACE and ~ expanded, ** recursive); when set, only these
    deny: list[str] = []  # path globs; deny wins over allow
    allowlist: list[str] = []  # bash: commands allowed (first words; a trailing * takes any arguments)
    denylist: list[str] = []  # bash: commands refused; deny wins
    allow_domains: list[str] = []  # web tools, bash's egress proxy: host names, `*.example.com` for subdomains
    timeout_s: float | None = None  # bash: `timeout` in seconds; None is ToolLimits.bash_timeout_s
    # A person approves a call first: `ask = true` every call; a list, the calls that match one of
    # its patterns (bash: a command glob; a path tool: a path glob; a web tool: a URL glob).
    ask: list[str] = []
    ask_all: bool = False
    # bash: folders visible inside the boundary besides the work directory ($WORKSPACE and ~ expanded)
    allow_read: list[str] = []  # read-only
    allow_write: list[str] = []  # read-write
    allow_network: bool = False  # bash: the host's network; without it, a network namespace with none


class McpPolicy(BaseModel):
    """The `[mcp]` table: with default_deny, only `server:tool` patterns in allowed_tools run
    (`server:*` and `*:tool` match any tool or server)."""

    default_deny: bool = False
    allowed_tools: list[str] = []
    ask_tools: list[str] = []  # `server:tool` patterns whose calls a person approves first


class ToolLimits(BaseModel):
    """What one call may use. Each bounds an attack: an endless loop, a flood of output, a memory
    bomb, a fork bomb, a disk fill, a huge download."""

    bash_timeout_s: float = 120.0  # the real system's default
    output_chars: int = 64_000  # what a result gives back to the model, at most
    memory_bytes: int = 1 << 30  # a command's address space (RLIMIT_AS)
    processes: int = 64  # processes a command may have at once (pids.max / RLIMIT_NPROC)
    file_bytes: int = 100 << 20  # the largest file a command or `write` may make (RLIMIT_FSIZE)
    fetch_bytes: int = 1 << 20  # what web_fetch reads of a response


class ToolPolicy(BaseModel):
    """The run's policy: a parsed policy.toml, or these safe defaults when there is none.

    With default_deny a tool without its own table is disabled, and a path tool without `allow`
    patterns refuses every path, as in the real system. `mcp` is None when the policy has no
    `[mcp]` table (the real system then allows every MCP tool and warns)."""

    default_deny: bool = False
    tools: dict[str, ToolRule] = {}
    protected_files: list[str] = []  # names or paths never read, listed, written or edited (secret)
    writable_files: list[str] = []  # steering names or paths agents may write after all (never a secret one)
    # The files this run was read from (its spec, what it includes, its policy, agentrun.yaml), as
    # paths from the work directory: set when the run starts, never written by an agent.
    steering_files: list[str] = []
    mcp: McpPolicy | None = None
    limits: ToolLimits = Field(default_factory=ToolLimits)
    # web_fetch may reach loopback, private and link-local addresses (a test's server, an intranet).
    allow_private: bool = False
    # `sandbox = "off"`: bash runs without an OS boundary where none can be made (rather than not at all).
    sandbox: bool = True
    source: str = ""  # the policy.toml it was read from, for messages; "" for the defaults
    ask_timeout_s: float | None = None  # how long a call waits for a person's approval; then it is rejected

    def rule(self, tool: str) -> ToolRule:
        """The tool's table, or what default_deny makes of a tool without one."""
        found = self.tools.get(tool)
        return found if found is not None else ToolRule(enabled=not self.default_deny)


class ToolCallInput(BaseModel):
    """One tool call as the workflow hands it to the run_tool activity."""

    call: ToolCall
    workdir: str  # the run's work directory: every path resolves inside it
    policy: ToolPolicy = Field(default_factory=ToolPolicy)
    run_id: str = ""
    step: str = ""  # the step (node key) whose model asked for the call
    idempotency_key: str = ""  # the step's key plus the call's place, for effects that must not repeat
    # Keep the result's content in the run's conversation store too, under the idempotency key: the
    # model's next turn names it there rather than carrying it (agentrun.activities.threads).
    keep: bool = False


class ToolResult(BaseModel):
    """What came back from one call, as the model reads it. Tool output is data from outside the
    engine: `taint_source` names where it came from, for the run's taint marks."""

    call_id: str
    name: str
    ok: bool
    content: str = ""  # what the model reads: the tool's output, or the refusal or error said plainly
    refused: bool = False  # the policy or the confinement refused the call; nothing was done
    error: str | None = None  # why it was refused, or the tool's error; None when ok
    truncated: bool = False  # content was cut to the policy's output cap
    duration_s: float = 0.0
    taint_source: str = ""  # where the content came from: "tool:<name>" (an MCP tool: "mcp:<server>:<tool>")
    attempt: int = 1  # more than 1: the call ran again after its worker stopped (the content says so)
    kept: str = ""  # where the conversation store keeps the content (ToolCallInput.keep); '' if it does not


def _spec(name: str) -> ToolSpec:
    tool = BUILTINS[name]
    return ToolSpec(name=tool.name, description=tool.description, parameters=tool.parameters)


_BUILTIN_SPECS: dict[str, ToolSpec] = {name: _spec(name) for name in BUILTINS}


def builtin_specs(names: list[str] | tuple[str, ...] = BUILTIN_TOOLS) -> list[ToolSpec]:
    """The specs of the built-in tools a spec grants, under either spelling (`Read` or `read`), once
    each, in the order granted. Names that are not built-ins (MCP tools) are left out."""
    found = [builtin_name(name) for name in names]
    return [_BUILTIN_SPECS[name] for name in dict.fromkeys(n for n in found if n is not None)]
