"""command:CMD ARGS — run a local program with the prompt on stdin; its stdout is the reply,
followed line by line as the program writes it.

The program runs in its own process group so a timeout or cancellation stops everything it
spawned, not just the direct child.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex

from agentrun.activities import progress
from agentrun.activities.agents._common import agent_error, spawn, stop_process_group, tail
from agentrun.lang.agent_uri import AgentUri
from agentrun.models.calls import AgentCall, AgentReply


async def send(call: AgentCall) -> AgentReply:
    argv = _argv(call.uri)
    pipe = asyncio.subprocess.PIPE
    proc = await spawn(argv, call.task_id, call.workdir, "command", stdin=pipe, stdout=pipe, stderr=pipe)
    try:
        async with asyncio.timeout(call.timeout_s):
            out, err, _ = await asyncio.gather(
                _follow(proc.stdout), _read(proc.stderr), _feed(proc.stdin, call.prompt.encode())
            )
            await proc.wait()
    finally:
        if proc.returncode is None:
            await stop_process_group(proc)
    if proc.returncode != 0:
        raise agent_error(f"command {argv[0]!r} exited with code {proc.returncode}: {tail(err) or '(no stderr)'}")
    return AgentReply(text=out.decode(errors="replace"), stderr=tail(err), first_token_s=progress.first_token_s())


CHUNK = 65536


async def _follow(stream: asyncio.StreamReader | None) -> bytes:
    """All of stdout, each whole line reported as it arrives (the reply is decoded once, whole)."""
    assert stream is not None
    out, shown = bytearray(), 0
    while chunk := await stream.read(CHUNK):
        out += chunk
        end = out.rfind(b"\n") + 1
        if end > shown:
            progress.wrote(out[shown:end].decode(errors="replace"))
            shown = end
    if len(out) > shown:
        progress.wrote(out[shown:].decode(errors="replace"))
    return bytes(out)


async def _read(stream: asyncio.StreamReader | None) -> bytes:
    assert stream is not None
    return await stream.read()


async def _feed(stream: asyncio.StreamWriter | None, data: bytes) -> None:
    assert stream is not None
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # a program that reads no input
        stream.write(data)
        await stream.drain()
    stream.close()


def _argv(uri: str) -> list[str]:
    try:
        argv = shlex.split(AgentUri.parse(uri).rest)
    except ValueError as err:
        raise agent_error(f"command: cannot parse {uri!r}: {err}") from None
    if not argv:
        raise agent_error(f"command: no program in {uri!r}")
    return argv
