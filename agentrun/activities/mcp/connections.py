"""The worker's live connections to MCP servers, one per declaration: a stdio server is started at
its first call and kept for the next ones (a start costs about half a second), and started again
after it died. Each connection lets at most its server's `concurrency` calls in at once.

The SDK's client must be entered and left by one task, so each connection has an owner task that
holds it open until the connection is dropped; calls from activities share it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from typing import Any

import anyio
import httpx
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from agentrun.activities.mcp.environment import server_environment
from agentrun.activities.tools import wall
from agentrun.lang.mcp_servers import McpServer
from agentrun.policy.paths import expand

CONNECTION_CLOSED = -32000  # the SDK's code for a connection that is gone
# How long a server may take to start and answer the handshake (`npx -y` may fetch a package first);
# a call's own timeout starts after.
START_S = 30.0


class ServerGone(Exception):
    """The server's process or HTTP endpoint went away before or during a call."""


class Connection:
    def __init__(self, server: McpServer):
        self.server = server
        self.slots = asyncio.Semaphore(server.concurrency)
        self.starts = 0  # how many times the server was started (or connected to)
        self._client: Client | None = None
        self._owner: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._lock = asyncio.Lock()

    async def client(self) -> Client:
        """The open client, the server started (again) first if it is not running."""
        async with self._lock:
            if self._client is None or self._owner is None or self._owner.done():
                await self._start()
            assert self._client is not None
            return self._client

    async def drop(self) -> None:
        """Close the connection (a stdio server's process ends); the next call starts a new one."""
        owner, self._client, self._owner = self._owner, None, None
        self._stop.set()
        if owner is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(owner, timeout=10)

    async def _start(self) -> None:
        ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        self._stop = asyncio.Event()
        self._owner = asyncio.create_task(self._own(ready, self._stop), name=f"mcp:{self.server.id}")
        self.starts += 1
        try:
            self._client = await asyncio.wait_for(asyncio.shield(ready), timeout=START_S)
        except TimeoutError:
            await self.drop()
            raise ServerGone(f"MCP server {self.server.id!r} did not start within {START_S:g}s") from None
        except BaseException:
            await self.drop()
            raise

    async def _own(self, ready: asyncio.Future[Client], stop: asyncio.Event) -> None:
        try:
            async with Client(_target(self.server)) as client:
                ready.set_result(client)
                await stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(ServerGone(f"MCP server {self.server.id!r} did not start: {reason(exc)}"))
            if isinstance(exc, asyncio.CancelledError):
                raise


def _target(server: McpServer) -> str | StdioServerParameters:
    if server.url:
        return server.url
    env = server_environment(server)
    argv = [server.command, *server.args]
    if server.sandbox:
        room = _room(server)
        argv = wall.wrap(room, argv)
        if "HOME" not in server.env:
            env["HOME"] = room.tmp  # the worker's own is not there: a private one, for caches
        env.setdefault("TMPDIR", room.tmp)
    return StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=server.cwd or None)


def _room(server: McpServer) -> wall.Room:
    """A stdio server's room: its cwd writable, what its declaration opens; refused (ServerGone,
    which the model reads) where this worker can make no boundary and the declaration does not say
    `sandbox: false`."""
    if not wall.layers().any:
        raise ServerGone(
            f"MCP server {server.id!r} was not started: this worker cannot confine a program (no user "
            "namespaces for bubblewrap, no Landlock), and its declaration does not say sandbox: false"
        )
    home = os.path.expanduser("~")
    # Without bwrap's private /tmp, one of its own for as long as it runs (left for the machine's
    # temporary-file cleaning: a server's process may outlive the connection by a moment).
    tmp = "/tmp" if wall.layers().bwrap else tempfile.mkdtemp(prefix=f"agentrun-mcp-{server.id}-")
    return wall.Room(
        tmp=tmp,
        workdir=os.path.realpath(server.cwd or os.getcwd()),
        read=tuple(expand(p, "", home) for p in server.allow_read),
        write=tuple(expand(p, "", home) for p in server.allow_write),
        network=server.network,
    )


def reason(exc: BaseException) -> str:
    """What went wrong, without the exception group's wrapping."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return str(exc) or type(exc).__name__


def message(exc: BaseException) -> str:
    """What a failed call says: the server's own message for an MCP error."""
    return exc.message if isinstance(exc, MCPError) else reason(exc)


def gone(exc: BaseException) -> bool:
    """Whether an error says the connection itself is lost (rather than a tool failing)."""
    if isinstance(exc, MCPError):
        return exc.code == CONNECTION_CLOSED
    if isinstance(exc, BaseExceptionGroup):
        return any(gone(e) for e in exc.exceptions)
    return isinstance(
        exc, ServerGone | OSError | anyio.ClosedResourceError | anyio.BrokenResourceError | httpx.TransportError
    )


_connections: dict[tuple[int, str], Connection] = {}


def connection(server: McpServer) -> Connection:
    """The worker's connection for a declaration (on this event loop), made at first use."""
    key = (id(asyncio.get_running_loop()), server.model_dump_json())
    found = _connections.get(key)
    if found is None:
        found = _connections[key] = Connection(server)
    return found


async def close_all() -> None:
    """Close every connection of this event loop (a worker shutting down, a test or bench ending)."""
    loop = id(asyncio.get_running_loop())
    for key in [k for k in _connections if k[0] == loop]:
        await _connections.pop(key).drop()


def text_of(content: list[Any]) -> str:
    """A tool result's content as the model reads it: its text parts, others named by their type."""
    parts = []
    for item in content:
        text = getattr(item, "text", None)
        parts.append(text if isinstance(text, str) else f"[{getattr(item, 'type', 'content')}]")
    return "\n".join(parts)
