"""A host tool agentrun.yaml binds to a command line: the call's arguments, as JSON, are its
standard input; what it prints is the result the model reads (its error output too when it exits
other than 0). It runs as bash's commands do (tools.sandbox), in the work directory, behind the
same OS boundary (tools.wall: bash's room under the run's policy), heartbeating while it runs."""

from __future__ import annotations

import asyncio
import json
import shlex
import time

from temporalio import activity

from agentrun.activities import keys
from agentrun.activities.beating import answered
from agentrun.activities.redact import redact
from agentrun.activities.tools import sandbox, wall
from agentrun.activities.tools.bash import NO_BOUNDARY
from agentrun.models.host_tools import RUN_HOST_COMMAND, HostCommandInput
from agentrun.models.tools import ToolResult

END = "AGENTRUN_ARGUMENTS_END"  # a line JSON without indentation never is


@activity.defn(name=RUN_HOST_COMMAND)
async def run_host_command(input: HostCommandInput) -> ToolResult:
    return await answered(_answer(input))


def command_line(command: str, arguments: object) -> str:
    """The command with the arguments on its standard input: a here-document, quoted so the shell
    expands nothing in it (JSON has no line breaks of its own, so it is one line, never END)."""
    text = json.dumps(arguments, ensure_ascii=False)
    return f"{command} <<'{END}'\n{text}\n{END}"


async def _answer(input: HostCommandInput) -> ToolResult:
    started = time.monotonic()
    name = input.call.name
    result = ToolResult(call_id=input.call.id, name=name, ok=False, taint_source=f"host:{name}")
    policy = input.policy
    if policy.sandbox and not wall.layers().any:
        result.refused, result.error = True, NO_BOUNDARY.replace("bash", f"host tool {name}", 1)
    else:
        room = await asyncio.to_thread(wall.room, policy, input.workdir) if policy.sandbox else None
        outcome = await sandbox.run_command(
            command_line(input.binding.command, input.call.arguments),
            input.workdir,
            policy.limits,
            input.binding.timeout_s,
            key=input.idempotency_key or keys.current(),
            keep_chars=policy.limits.output_chars,
            heartbeat=activity.heartbeat,
            room=room,
        )
        if outcome.exit_code == 0:
            result.ok, result.content = True, redact(outcome.stdout)
        elif outcome.exit_code is None:
            result.error = f"{shlex.split(input.binding.command)[0]} did not finish within {input.binding.timeout_s:g}s"
        else:
            said = (outcome.stderr or outcome.stdout).strip()[-2000:]
            result.error = redact(f"exit status {outcome.exit_code}: {said}")
    if result.error is not None:
        result.content = ("refused: " if result.refused else "error: ") + result.error
    result.duration_s = round(time.monotonic() - started, 6)
    return result
