"""The way out for a bash command whose policy names `[bash] allow_domains`: an HTTP proxy the
worker runs for the one call, on a Unix socket bound into the command's sandbox (which has no
network of its own). Inside, the launcher listens on the sandbox's own loopback and hands every
connection to that socket; the command's HTTP_PROXY and HTTPS_PROXY name it.

The proxy takes `CONNECT host:port` (HTTPS, any TLS) and plain-HTTP requests with an absolute URL,
and lets through only a host `allow_domains` matches (as web_fetch's: `*.example.com` for
subdomains, `*` for any) whose every address is public (tools.addresses: web_fetch's rules, lifted
by `[web_fetch] allow_private`); it connects to the very address it checked. Anything else gets
`403` with the reason, and no connection is made.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

from agentrun.activities.tools import addresses
from agentrun.activities.tools.base import Refused, ToolFailed
from agentrun.models.tools import ToolPolicy
from agentrun.policy.web import domain_refusal

HEAD_BYTES = 16_384  # a request's head, at most


@contextlib.asynccontextmanager
async def proxy(policy: ToolPolicy) -> AsyncIterator[str]:
    """A proxy for one call under `policy`, for as long as the block runs: its socket's path."""
    folder = tempfile.mkdtemp(prefix="agentrun-egress-")
    path = os.path.join(folder, "proxy.sock")
    server = await asyncio.start_unix_server(lambda r, w: _serve(policy, r, w), path)
    try:
        yield path
    finally:
        server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), timeout=2)
        shutil.rmtree(folder, ignore_errors=True)


async def _serve(policy: ToolPolicy, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=30)
        if len(head) > HEAD_BYTES:
            raise Refused("the request's head is too long")
        method, target, version = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
        host, port, rest = _where(method, target, version, head)
        for address in await _allowed(policy, host, port):
            with contextlib.suppress(OSError):
                upstream = await asyncio.wait_for(asyncio.open_connection(address, port), timeout=15)
                break
        else:
            raise ToolFailed(f"cannot connect to {host}:{port}")
        up_reader, up_writer = upstream
        if method == "CONNECT":
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            up_writer.write(rest)
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
    except (Refused, ToolFailed) as e:
        status = "403 Forbidden" if isinstance(e, Refused) else "502 Bad Gateway"
        writer.write(f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n{e}\n".encode())
    except (OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
        pass
    finally:
        with contextlib.suppress(OSError):
            writer.close()


def _where(method: str, target: str, version: str, head: bytes) -> tuple[str, int, bytes]:
    """(host, port, the bytes to send upstream) of a request: CONNECT's target, or a plain request
    with an absolute URL, sent on with its path alone."""
    if method == "CONNECT":
        host, _, port = target.rpartition(":")
        return host.strip("[]"), int(port), b""
    url = urlsplit(target)
    if url.scheme != "http" or not url.hostname:
        raise Refused(f"the proxy takes CONNECT and http:// URLs, not {target[:100]!r}")
    path = (url.path or "/") + (f"?{url.query}" if url.query else "")
    line = f"{method} {path} {version}".encode("latin-1")
    return url.hostname, url.port or 80, line + head[head.index(b"\r\n") :]


async def _allowed(policy: ToolPolicy, host: str, port: int) -> list[str]:
    rule = policy.rule("bash")
    if not rule.allow_domains:
        raise Refused("the policy allows no domain for bash")
    why = domain_refusal(rule, "bash", host)
    if why:
        raise Refused(why)
    return await addresses.resolve(host, port, allow_private=policy.allow_private)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            writer.close()
