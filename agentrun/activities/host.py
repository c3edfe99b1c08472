"""A program's own functions as agent tools: `HostTool.of(fn)` reads a typed function, sync or
async, into the tool a model is offered (its name, the first paragraph of its docstring, and a JSON
Schema of its parameters made by pydantic from the signature), and the two activities a worker that
has it serves on the tool's own task queue (models.host_tools): describe it, and call it.

A call's arguments are validated by the same model before the function runs: a missing or
mistyped argument is an error the model reads, and the function is not called. The call's
idempotency key is at hand while it runs (`idempotency_key()`, or a parameter of that name)."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, get_type_hints

from pydantic import BaseModel, ConfigDict, ValidationError, create_model
from temporalio import activity

from agentrun.activities import keys
from agentrun.activities.beating import answered
from agentrun.activities.redact import redact
from agentrun.models.builtin_tools import ToolArgs, ToolSettings
from agentrun.models.host_tools import CALL_HOST_TOOL, DESCRIBE_HOST_TOOL, HostCallInput, HostToolInfo, queue_of
from agentrun.models.tools import ToolResult, ToolSpec

KEY_PARAMETER = "idempotency_key"  # a parameter of this name gets the call's key, not the model's value
_key: contextvars.ContextVar[str] = contextvars.ContextVar("agentrun_host_idempotency_key", default="")


def idempotency_key() -> str:
    """The running host tool call's idempotency key: the same for every attempt of one call."""
    return _key.get()


@dataclass(frozen=True)
class HostTool:
    """One function as a tool: what the model is offered and how its calls run."""

    name: str
    description: str
    args: type[BaseModel]
    fn: Callable[..., Any]
    settings: ToolSettings = ToolSettings()

    @classmethod
    def of(cls, fn: Callable[..., Any] | HostTool, name: str = "", settings: ToolSettings | None = None) -> HostTool:
        if isinstance(fn, HostTool):
            return fn
        doc = inspect.getdoc(fn) or ""
        tool_name = name or fn.__name__
        return cls(
            tool_name, doc.split("\n\n")[0].strip(), _arguments_model(fn, tool_name), fn, settings or ToolSettings()
        )

    @property
    def queue(self) -> str:
        return queue_of(self.name)

    @property
    def spec(self) -> ToolSpec:
        schema = self.args.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        return ToolSpec(name=self.name, description=self.description, parameters=schema)

    async def run(self, arguments: dict[str, Any], key: str) -> Any:
        values = dict(self.args.model_validate(arguments))
        if KEY_PARAMETER in inspect.signature(self.fn).parameters:
            values[KEY_PARAMETER] = key
        token = _key.set(key)
        try:
            if inspect.iscoroutinefunction(self.fn):
                return await self.fn(**values)
            context = contextvars.copy_context()  # the key reaches a sync function in its thread too
            return await asyncio.to_thread(context.run, self.fn, **values)
        finally:
            _key.reset(token)

    def activities(self) -> list[Callable[..., Any]]:
        """The describe and call activities of this tool, for a worker on its queue."""

        @activity.defn(name=DESCRIBE_HOST_TOOL)
        async def describe() -> HostToolInfo:
            return HostToolInfo(spec=self.spec, settings=self.settings)

        @activity.defn(name=CALL_HOST_TOOL)
        async def call(input: HostCallInput) -> ToolResult:
            return await answered(_answer(self, input))

        return [describe, call]


class _Args(BaseModel):
    model_config = ConfigDict(extra="ignore")


def _arguments_model(fn: Callable[..., Any], name: str) -> type[BaseModel]:
    """A pydantic model of the function's parameters (but the idempotency key), from its annotations."""
    hints = get_type_hints(fn, include_extras=True)
    fields: dict[str, Any] = {}
    for param in inspect.signature(fn).parameters.values():
        if param.name == KEY_PARAMETER or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (hints.get(param.name, Any), default)
    return create_model(f"{name}_arguments", __base__=_Args, **fields)


async def _answer(tool: HostTool, input: HostCallInput) -> ToolResult:
    started = time.monotonic()
    result = ToolResult(call_id=input.call.id, name=tool.name, ok=False, taint_source=f"host:{tool.name}")
    key = input.idempotency_key or keys.current()
    try:
        value = await tool.run(input.call.arguments, key)
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        result.content, result.ok = redact(text), True
    except ValidationError as exc:
        said = "; ".join(ToolArgs.said(e) for e in exc.errors())
        result.error = said
    except Exception as exc:  # the function's own failure: the model reads it and may try otherwise
        result.error = redact(f"{tool.name} failed: {type(exc).__name__}: {exc}")
    if result.error is not None:
        result.content = "error: " + result.error
    cap = input.output_chars
    result.truncated = len(result.content) > cap
    result.content = result.content[:cap]
    result.duration_s = round(time.monotonic() - started, 6)
    return result


# The host tools the workers of this process have, by name (`start` counts them as bound).
REGISTERED: dict[str, HostTool] = {}
