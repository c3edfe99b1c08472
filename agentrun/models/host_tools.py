"""Host tools: functions of the program that runs a worker (or commands and MCP tools agentrun.yaml
binds), offered to agents by name. Each host tool has a task queue of its own: only workers that
have the tool poll it, so its calls go to them alone and wait, pending, while none is running."""

from __future__ import annotations

from pydantic import BaseModel

from agentrun.models.builtin_tools import ToolSettings
from agentrun.models.tools import ToolCall, ToolSpec

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
