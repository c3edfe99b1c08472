"""Host tools: functions of the program that runs a worker (or commands and MCP tools agentrun.yaml
binds), offered to agents by name. Each host tool has a task queue of its own: only workers that
have the tool poll it, so its calls go to them alone and wait, pending, while none is running."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from agentrun.models.builtin_tools import ToolSettings
from agentrun.models.tools import ToolCall, ToolPolicy, ToolSpec

QUEUE_PREFIX = "agentrun-host-"
DESCRIBE_HOST_TOOL = "describe_host_tool"  # what the tool is: its spec and how its calls run
CALL_HOST_TOOL = "call_host_tool"


def queue_of(name: str) -> str:
    """The task queue of the workers that have host tool `name`."""
    return QUEUE_PREFIX + name


class HostToolInfo(BaseModel):
    """A host tool as the worker that has it describes it."""

    spec: ToolSpec
    settings: ToolSettings = ToolSettings()


class HostCallInput(BaseModel):
    call: ToolCall
    run_id: str = ""
    step: str = ""
    idempotency_key: str = ""
    output_chars: int = 64_000


RUN_HOST_COMMAND = "run_host_command"


class HostBinding(BaseModel):
    """A host tool agentrun.yaml binds (`host_tools:`), without a program: an MCP server's tool
    (`mcp: server:tool`, the server declared under `mcp_servers:`), or a command line that reads
    the call's arguments as JSON on its standard input and prints the result, run in the work
    directory behind the same OS boundary as bash."""

    mcp: str = ""
    command: str = ""
    description: str = ""
    input_schema: dict[str, Any] = {}
    timeout_s: float = 60.0

    @property
    def server(self) -> str:
        return self.mcp.partition(":")[0]

    @property
    def tool(self) -> str:
        return self.mcp.partition(":")[2]

    def spec(self, name: str) -> ToolSpec:
        schema = self.input_schema or {"type": "object", "properties": {}}
        return ToolSpec(name=name, description=self.description or f"Run {self.command}", parameters=schema)


class HostCommandInput(BaseModel):
    call: ToolCall
    binding: HostBinding
    workdir: str
    policy: ToolPolicy
    idempotency_key: str = ""
