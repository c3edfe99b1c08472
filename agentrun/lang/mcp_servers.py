"""MCP servers declared as tool sources: an id with a stdio command, or a streamable-HTTP url. Declared
once, in agentrun.yaml's `mcp_servers:` or in a spec, and named by the tools an agent is granted.

A server's `env` names what it is started with, and nothing else of the worker's environment reaches
it but PATH, HOME and LANG. A stdio server runs behind the OS boundary bash runs behind
(activities.tools.wall): its `cwd` writable, the system's programs readable, no network unless it
says `network: true`, more folders with `allow_read` / `allow_write`. A value written `${NAME}` is read from the worker's environment when the
server starts, so a key a server needs never travels in a run's input or history.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from agentrun.lang.errors import Problem, SpecError

# What a server id may be: it becomes part of the tool names a model is offered (mcp_<id>_<tool>),
# which the chat APIs limit to letters, digits, '_' and '-'.
SERVER_ID = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,31}$")
FROM_WORKER = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")


class McpServer(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    command: str = ""
    args: list[str] = []
    # The server's environment: NAME: value, or NAME: ${NAME} to pass the worker's value on. A list
    # of names is read as NAME: ${NAME} each.
    env: dict[str, str] = {}
    cwd: str = ""
    url: str = ""
    timeout_s: float = Field(default=60.0, gt=0)  # one call, as the Agentfile's real system's default
    concurrency: int = Field(default=4, ge=1, le=64)  # calls in flight at once, per worker
    denied_tools: list[str] = []  # never offered nor called (the Agentfile's `denied_tools`)
    # A stdio server runs behind the same OS boundary as bash, in `cwd` (writable): these open it.
    network: bool = False  # the host's network (a fetch server); without it, none at all
    allow_read: list[str] = []  # more folders it sees, read-only (~ expanded)
    allow_write: list[str] = []  # and read-write
    sandbox: bool = True  # false: started without the boundary (also where the worker cannot make one)

    @model_validator(mode="before")
    @classmethod
    def _env_names(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("env"), list):
            data = {**data, "env": {str(name): "${" + str(name) + "}" for name in data["env"]}}
        return data

    @model_validator(mode="after")
    def _one_transport(self) -> McpServer:
        if not SERVER_ID.match(self.id):
            raise ValueError("a server id is letters, digits and '-', starting with a letter (at most 32)")
        if bool(self.command) == bool(self.url):
            raise ValueError("give either `command` (stdio) or `url` (streamable HTTP)")
        if self.url and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url {self.url!r} is not an http(s) URL")
        return self

    @property
    def transport(self) -> str:
        return "stdio" if self.command else "http"


HINT = (
    "mcp_servers:\n    files: {command: npx, args: [-y, '@modelcontextprotocol/server-filesystem', '.']}\n"
    "    search: {url: 'http://127.0.0.1:8931/mcp', timeout_s: 30}"
)


def read_servers(found: Any, file: str, line: int = 1) -> dict[str, McpServer]:
    """The `mcp_servers:` mapping of agentrun.yaml or a spec (id -> declaration); SpecError with the
    declaration's file:line for a bad one."""
    if found is None:
        return {}
    if not isinstance(found, dict):
        raise SpecError([Problem(file, line, 1, "'mcp_servers' must map server ids to declarations", HINT)])
    servers, problems = {}, []
    for server_id, body in found.items():
        at = getattr(found, "key_pos", {}).get(server_id, (line, 1))
        if not isinstance(body, dict):
            problems.append(Problem(file, at[0], at[1], f"MCP server '{server_id}' must be a mapping", HINT))
            continue
        try:
            servers[str(server_id)] = McpServer.model_validate({**body, "id": str(server_id)})
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(p) for p in error["loc"])
            said = error["msg"].removeprefix("Value error, ")
            problems.append(
                Problem(file, at[0], at[1], f"MCP server '{server_id}'{' ' + where if where else ''}: {said}", HINT)
            )
    if problems:
        raise SpecError(problems)
    return servers


def tool_name(server_id: str, tool: str) -> str:
    """The name a model is offered for a server's tool, as the Agentfile's real system names it."""
    return f"mcp_{server_id}_{tool}"


def split_tool_name(name: str) -> tuple[str, str] | None:
    """(server id, tool) of an offered name, or None when it is not an MCP tool's name. Server ids
    hold no '_', so `mcp_<id>_<tool>` has one reading."""
    server, sep, tool = name.removeprefix("mcp_").partition("_")
    if not name.startswith("mcp_") or not sep or not server or not tool:
        return None
    return server, tool
