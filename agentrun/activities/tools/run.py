"""The run_tool activity: one tool call, checked against the run's policy, as a result the model reads.

Whatever happens — done, refused, failed — the model gets a ToolResult: a refusal or a tool's error
is something to read and work around, not a failure of the step. What a tool returns is cut to the
policy's output cap and cleared of the worker's secrets before it goes into history. The arguments
are parsed by the tool's declaration (models.builtin_tools), the same that gave the model its schema.

The activity heartbeats while the call runs (activities.beating): a call whose worker dies runs
again on another worker, and its result says so at its head.
"""

from __future__ import annotations

import time

from temporalio import activity

from agentrun.activities import keys, threads
from agentrun.activities.beating import answered
from agentrun.activities.redact import redact
from agentrun.activities.tools.base import Refused, ToolContext, ToolFailed
from agentrun.activities.tools.confine import Changed, NotFound, OutsideWorkdir, Workdir
from agentrun.activities.tools.registry import TOOLS
from agentrun.models.builtin_tools import BUILTINS, BadArguments
from agentrun.models.tools import RUN_TOOL, ToolCallInput, ToolResult, builtin_name
from agentrun.policy import Asked, decide


@activity.defn(name=RUN_TOOL)
async def run_tool(input: ToolCallInput) -> ToolResult:
    result = await answered(_answer(input))
    if input.keep and input.idempotency_key:  # the content as the model reads it, notice included
        result.kept = await threads.keep(input.idempotency_key, result.content)
    return result


async def _answer(input: ToolCallInput) -> ToolResult:
    started = time.monotonic()
    call = input.call
    name = builtin_name(call.name) or call.name
    result = ToolResult(call_id=call.id, name=name, ok=False, taint_source=f"tool:{name}")
    try:
        result.content = await _run(input, name)
        result.ok = True
    except Refused as e:
        result.refused, result.error = True, redact(str(e))
    except ToolFailed as e:
        result.error = redact(str(e))
    except (OutsideWorkdir, Changed) as e:
        result.refused, result.error = True, f"path {e} is outside the work directory or changed while it was checked"
    except NotFound as e:
        result.error = f"{e}: no such file or directory"
    except OSError as e:
        result.error = redact(f"{name} failed: {e.strerror or e}")
    if result.error is not None:
        result.content = ("refused: " if result.refused else "error: ") + result.error
    result.content, result.truncated = _cut(result.content, input.policy.limits.output_chars)
    result.duration_s = round(time.monotonic() - started, 6)
    return result


async def _run(input: ToolCallInput, name: str) -> str:
    tool, declared = TOOLS.get(name), BUILTINS.get(name)
    if tool is None or declared is None:
        raise Refused(f"there is no tool named {input.call.name}; the tools are: {', '.join(TOOLS)}")
    decision = decide(input.policy, Asked("builtin", name))  # the tool's table: each tool asks again on what it touches
    if decision.refused:  # "ask": the workflow had a person approve it first
        raise Refused(decision.reason)
    try:
        args = declared.args.parse(input.call.arguments)
    except BadArguments as e:
        raise ToolFailed(str(e)) from None
    try:
        workdir = Workdir(input.workdir)
    except OSError as e:
        raise ToolFailed(f"the work directory cannot be opened: {e.strerror}") from None
    key = input.idempotency_key or keys.current()
    with workdir:
        text = await tool(ToolContext(name, workdir, input.policy, key), args)
    return redact(text)


def _cut(text: str, limit: int) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    return text[
        :limit
    ] + f"\n[… cut here: the result is longer than the {limit} characters a tool result may have]", True
