"""agentapi:http://HOST:PORT[?type=AGENT&cmd=AGENT+COMMAND] — a terminal agent behind agentapi.

The client rules from the protocol notes, each of which fixed a real bug:
- strip the prompt and never send while the agent is `running` (the server rejects it);
- remember the highest message id before sending and accept only a newer `agent` message,
  once the status is `stable` again (else the banner or the previous reply is taken);
- a long timeout on POST /message (it blocks until the agent starts), short ones on GETs;
- the task timeout bounds the whole exchange.

The reply is followed as it grows through `GET /events` (`message_update` for the newest agent
message, `status_change` when the agent settles), which also says when to look for the settled
reply; a server without that endpoint is polled on `/messages` instead. Either way the reply taken
is the one `/messages` holds once the agent is stable, by the rules above.

lifecycle "reuse" talks to a server that is already running and keeps the conversation.
lifecycle "refresh" starts a private server for the task on its first prompt; later prompts of
the same task (loop iterations, retries, the reminder) reach the same agent, and `release`
(called when the task ends) stops it. Claude Code started so gets `--allowedTools` with the tools
the task's spec grants.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import socket
import tempfile
from dataclasses import dataclass
from typing import IO, Any
from urllib.parse import parse_qs, urlsplit

import httpx
from httpx_sse import SSEError, aconnect_sse

from agentrun.activities import progress
from agentrun.activities.agents._common import (
    agent_error,
    http_client,
    spawn,
    stop_process_group,
    tail,
)
from agentrun.lang.agent_uri import AgentUri
from agentrun.models.calls import AgentCall, AgentReply

POLL_S = 0.5
# While events come, the settled reply is looked for when they say so, and this often besides.
EVENTS_CHECK_S = 5.0
GET_TIMEOUT_S = 5.0
# A fresh server needs a few seconds to settle; codex can take up to two minutes.
STARTUP_S = 180.0
# Once a prompt is sent, a retry would send it again, so ride out short blips while waiting.
MAX_POLL_FAILURES = 6
DEFAULT_TYPE = "claude"


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str
    port: int | None
    path: str
    agent_type: str
    command: list[str]

    def base_url(self, port: int | None = None) -> str:
        port = port or self.port
        netloc = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{netloc}{f':{port}' if port else ''}{self.path}"


def parse(uri: str) -> Target:
    rest = AgentUri.parse(uri).rest
    parts = urlsplit(rest)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise agent_error(f"agentapi: expected agentapi:http://HOST:PORT, got {uri!r}")
    query = parse_qs(parts.query)
    agent_type = (query.get("type") or [DEFAULT_TYPE])[0]
    try:
        command = shlex.split((query.get("cmd") or [""])[0]) or [agent_type]
        port = parts.port
    except ValueError as err:
        raise agent_error(f"agentapi: cannot parse {uri!r}: {err}") from None
    return Target(parts.scheme, parts.hostname, port, parts.path.rstrip("/"), agent_type, command)


async def send(call: AgentCall) -> AgentReply:
    target = parse(call.uri)
    prompt = call.prompt.strip()
    if not prompt:
        raise agent_error(f"agentapi: empty prompt for task {call.task_id!r}")
    async with asyncio.timeout(call.timeout_s):
        if call.lifecycle == "refresh":
            reply = await _converse_refreshed(target, call, prompt)
        else:
            reply = await _converse(target.base_url(), prompt, call.timeout_s)
    progress.shows(reply.text)  # a reply that settled before any of it was seen
    return reply.model_copy(update={"first_token_s": progress.first_token_s()})


@dataclass
class _TaskServer:
    proc: asyncio.subprocess.Process
    base_url: str
    log: IO[bytes]


# Refresh-mode servers of tasks still running, by run and task, in this worker process.
_task_servers: dict[str, _TaskServer] = {}


def _task_key(call: AgentCall) -> str:
    return f"{call.run_id}/{call.task_id}"


async def _converse_refreshed(target: Target, call: AgentCall, prompt: str) -> AgentReply:
    server = _task_servers.get(_task_key(call))
    if server is None or server.proc.returncode is not None:
        server = await _start_task_server(target, call)
    try:
        return await _converse(server.base_url, prompt, call.timeout_s)
    except asyncio.CancelledError:
        await release(call)  # the task is being cancelled: nobody will release it later
        raise


async def _start_task_server(target: Target, call: AgentCall) -> _TaskServer:
    port = target.port or _free_port(target.host)
    argv = [*_binary(), "server", f"--type={target.agent_type}", "--port", str(port), "--", *target.command]
    argv += _allowed_tools(target, call)
    log = tempfile.TemporaryFile()
    proc = await spawn(
        argv,
        call.task_id,
        call.workdir,
        "agentapi (set AGENTRUN_AGENTAPI_BIN)",
        credentials=True,  # the coding agent it starts signs in to its model with them
        stdin=asyncio.subprocess.DEVNULL,
        stdout=log,
        stderr=log,
    )
    server = _TaskServer(proc, target.base_url(port), log)
    try:
        await _wait_started(server.base_url, proc, log)
    except BaseException:
        await stop_process_group(proc)
        log.close()
        raise
    _task_servers[_task_key(call)] = server
    return server


async def release(call: AgentCall) -> bool:
    """Stop the refresh-mode server of call's task, if this process runs one. True if it did."""
    server = _task_servers.pop(_task_key(call), None)
    if server is None:
        return False
    await _stop(server)
    return True


async def release_all() -> None:
    for key in list(_task_servers):
        await _stop(_task_servers.pop(key))


async def _stop(server: _TaskServer) -> None:
    await stop_process_group(server.proc)
    server.log.close()


async def _converse(base_url: str, prompt: str, timeout_s: float) -> AgentReply:
    async with http_client(GET_TIMEOUT_S) as client:
        await _wait_stable(client, base_url)
        last_id = _highest_id(await _messages(client, base_url))
        await _post_message(client, base_url, prompt, timeout_s)
        return await _await_reply(client, base_url, last_id)


async def _status(client: httpx.AsyncClient, base_url: str) -> dict[str, Any]:
    response = await client.get(f"{base_url}/status")
    response.raise_for_status()
    body = _json(response)
    if not isinstance(body, dict) or body.get("status") not in ("running", "stable"):
        raise agent_error(f"agentapi: {base_url}/status returned {str(body)[:200]}")
    return body


async def _messages(client: httpx.AsyncClient, base_url: str) -> list[dict[str, Any]]:
    response = await client.get(f"{base_url}/messages")
    response.raise_for_status()
    body = _json(response)
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list) or not all(_is_message(m) for m in messages):
        raise agent_error(f"agentapi: {base_url}/messages returned {str(body)[:200]}")
    return messages


def _json(response: httpx.Response) -> Any:
    """The reply's JSON. A body that is not JSON at all (cut off, an HTML page from a server that is
    starting or stopping) is a transport failure like a refused connection: retried, within the
    poll's and the activity's bounds. JSON of the wrong shape is the agent breaking the protocol."""
    try:
        return response.json()
    except ValueError:
        said = response.text[:120].replace("\n", " ")
        raise httpx.RemoteProtocolError(
            f"{response.request.url} answered with a body that is not JSON: {said!r}", request=response.request
        ) from None


def _is_message(m: Any) -> bool:
    return isinstance(m, dict) and isinstance(m.get("id"), int) and isinstance(m.get("content"), str)


def _highest_id(messages: list[dict[str, Any]]) -> int:
    return max((m["id"] for m in messages), default=-1)


async def _wait_stable(client: httpx.AsyncClient, base_url: str) -> None:
    while (await _status(client, base_url))["status"] != "stable":
        await asyncio.sleep(POLL_S)


async def _post_message(client: httpx.AsyncClient, base_url: str, prompt: str, timeout_s: float) -> None:
    # The server answers only once the agent has started working, which can take a while.
    response = await client.post(
        f"{base_url}/message",
        json={"content": prompt, "type": "user"},
        timeout=httpx.Timeout(timeout_s, connect=GET_TIMEOUT_S),
    )
    response.raise_for_status()
    body = _json(response)
    if not isinstance(body, dict) or body.get("ok") is not True:
        raise agent_error(f"agentapi: {base_url}/message did not accept the prompt: {str(body)[:200]}")


async def _await_reply(client: httpx.AsyncClient, base_url: str, last_id: int) -> AgentReply:
    settled = asyncio.Event()
    follower = asyncio.create_task(_follow_events(client, base_url, last_id, settled))
    failures = 0
    try:
        while True:
            await _next_look(follower, settled)
            try:
                reply = await _settled_reply(client, base_url, last_id, polled=follower.done())
            except httpx.TransportError:
                failures += 1
                if failures >= MAX_POLL_FAILURES:
                    raise
                continue
            failures = 0
            if reply is not None:
                return reply
    finally:
        follower.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await follower


async def _next_look(follower: asyncio.Task[None], settled: asyncio.Event) -> None:
    """Wait until the events say the agent may have settled (or a while passes); poll when there
    are no events."""
    if follower.done():
        await asyncio.sleep(POLL_S)
        return
    waiting = asyncio.ensure_future(settled.wait())
    try:
        await asyncio.wait([waiting, follower], timeout=EVENTS_CHECK_S, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiting.cancel()
    settled.clear()


async def _follow_events(client: httpx.AsyncClient, base_url: str, last_id: int, settled: asyncio.Event) -> None:
    """Report the reply as it grows, from GET /events; set `settled` on each event that comes while
    the agent is stable, for the reply to be looked for. Returns when the server has no events
    (then it is polled) or they end."""
    status = ""
    try:
        # No read timeout: an agent may think for minutes between two events; the polls notice a dead server.
        timeout = httpx.Timeout(None, connect=GET_TIMEOUT_S)
        async with aconnect_sse(client, "GET", f"{base_url}/events", timeout=timeout) as source:
            if source.response.status_code != 200:
                return
            async for event in source.aiter_sse():
                data = json.loads(event.data)
                if event.event == "status_change":
                    status = str(data.get("status"))
                    progress.status(status)
                elif event.event == "message_update" and _is_reply(data, last_id):
                    progress.shows(str(data.get("message") or ""))
                else:
                    continue
                if status == "stable":
                    settled.set()
    except (httpx.TransportError, SSEError, ValueError, AttributeError):
        return  # the polls go on without events


def _is_reply(message: dict[str, Any], last_id: int) -> bool:
    """An agent message newer than the prompt (a message of /messages or a message_update)."""
    return isinstance(message.get("id"), int) and message["id"] > last_id and message.get("role") == "agent"


async def _settled_reply(
    client: httpx.AsyncClient, base_url: str, last_id: int, polled: bool = True
) -> AgentReply | None:
    """The newest agent message after last_id, if the agent was stable before and after reading.

    Checking the status on both sides means a reply still being written is never taken, even if
    the agent starts working between two requests. `polled`: no events report the reply as it
    grows, so a look while the agent works reports it.
    """
    before = (await _status(client, base_url))["status"]
    progress.status(before)
    if before != "stable":
        if polled:
            fresh = [m for m in await _messages(client, base_url) if _is_reply(m, last_id)]
            if fresh:
                progress.shows(max(fresh, key=lambda m: m["id"])["content"])
        return None
    fresh = [m for m in await _messages(client, base_url) if _is_reply(m, last_id)]
    after = await _status(client, base_url)
    if not fresh or after["status"] != "stable":
        return None
    newest = max(fresh, key=lambda m: m["id"])
    return AgentReply(text=newest["content"], model=str(after.get("agent_type") or ""))


def _allowed_tools(target: Target, call: AgentCall) -> list[str]:
    """Claude Code started for the task may use the tools its spec grants, and is asked before any
    other; the other agents agentapi runs take no such list (their own settings decide)."""
    if target.agent_type != "claude" or not call.allowed_tools:
        return []
    return ["--allowedTools", ",".join(call.allowed_tools)]


def _binary() -> list[str]:
    # shlex lets tests and wrappers use e.g. "python -m tests.fakes.agentapi_server".
    return shlex.split(os.environ.get("AGENTRUN_AGENTAPI_BIN") or "agentapi")


def _free_port(host: str) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


async def _wait_started(base_url: str, proc: asyncio.subprocess.Process, log: IO[bytes]) -> None:
    try:
        async with asyncio.timeout(STARTUP_S), http_client(GET_TIMEOUT_S) as client:
            while not await _is_stable(client, base_url):
                if proc.returncode is not None:
                    log.seek(0)
                    raise agent_error(
                        f"agentapi: server exited with code {proc.returncode} before it was ready: "
                        f"{tail(log.read()) or '(no output)'}"
                    )
                await asyncio.sleep(POLL_S / 2)
    except TimeoutError:
        raise TimeoutError(f"agentapi server at {base_url} was not stable within {STARTUP_S:g}s") from None


async def _is_stable(client: httpx.AsyncClient, base_url: str) -> bool:
    try:
        return (await _status(client, base_url))["status"] == "stable"
    except httpx.TransportError:
        return False  # not listening yet
