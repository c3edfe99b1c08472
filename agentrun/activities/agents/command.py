"""command:CMD ARGS — run a local program with the prompt on stdin; its stdout is the reply.

The program runs in its own process group so a timeout or cancellation stops everything it
spawned, not just the direct child.
"""

from __future__ import annotations

import asyncio
import shlex

from agentrun.activities.agents._common import agent_error, spawn, stop_process_group, tail
from agentrun.lang.calls import AgentCall, AgentReply
from agentrun.lang.drivers import AgentUri


async def send(call: AgentCall) -> AgentReply:
    argv = _argv(call.uri)
    pipe = asyncio.subprocess.PIPE
    proc = await spawn(argv, call.task_id, call.workdir, "command", stdin=pipe, stdout=pipe, stderr=pipe)
    try:
        async with asyncio.timeout(call.timeout_s):
            out, err = await proc.communicate(call.prompt.encode())
    finally:
        if proc.returncode is None:
            await stop_process_group(proc)
    if proc.returncode != 0:
        raise agent_error(f"command {argv[0]!r} exited with code {proc.returncode}: {tail(err) or '(no stderr)'}")
    return AgentReply(text=out.decode(errors="replace"), stderr=tail(err))


def _argv(uri: str) -> list[str]:
    try:
        argv = shlex.split(AgentUri.parse(uri).rest)
    except ValueError as err:
        raise agent_error(f"command: cannot parse {uri!r}: {err}") from None
    if not argv:
        raise agent_error(f"command: no program in {uri!r}")
    return argv
