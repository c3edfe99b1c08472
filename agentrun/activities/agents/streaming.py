"""One chat request, streamed when the server can: the reply arrives as server-sent events, each
driver turning its API's events into the whole response it would have had unstreamed.

A server that refuses `stream: true` (some OpenAI-compatible ones do) is asked again without it,
and from then on not streamed at all in this worker; the log says so once.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
from httpx_sse import EventSource, ServerSentEvent

LOG = logging.getLogger("agentrun.agents")
# What a server answers a request field it does not know, such as `stream` or `stream_options`.
REFUSED = frozenset({400, 415, 422, 501})

Assemble = Callable[[AsyncIterator[ServerSentEvent]], Awaitable[dict[str, Any]]]

_unstreamed: set[str] = set()  # URLs that refused to stream, in this worker process


async def complete(
    client: httpx.AsyncClient,
    url: str,
    body: dict[str, Any],
    streamed: dict[str, Any],
    headers: dict[str, str],
    assemble: Assemble,
) -> dict[str, Any]:
    """The response to `body`, asked as `body | streamed` and assembled from its events unless
    the server at `url` does not stream."""
    refusal = ""
    if url not in _unstreamed:
        answer = await _streamed(client, url, {**body, **streamed}, headers, assemble)
        if isinstance(answer, dict):
            return answer
        refusal = answer
    response = await client.post(url, json=body, headers=headers)
    response.raise_for_status()
    if refusal:  # the same request unstreamed was fine: it was the streaming the server refused
        stop_streaming(url, f"it refused a streamed request ({refusal})")
    return response.json()


def stop_streaming(url: str, why: str) -> None:
    """Ask `url` unstreamed from now on, and say why once."""
    if url not in _unstreamed:
        _unstreamed.add(url)
        LOG.warning("%s: %s; asking it without streaming from now on", url, why)


async def _streamed(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], headers: dict[str, str], assemble: Assemble
) -> dict[str, Any] | str:
    """The assembled response, or why the server would not stream it."""
    async with client.stream("POST", url, json=body, headers={**headers, "Accept": "text/event-stream"}) as response:
        if response.status_code in REFUSED:
            await response.aread()
            return f"HTTP {response.status_code}: {response.text[:200]}"
        if response.is_error:
            await response.aread()  # the error's detail is read from the body
            response.raise_for_status()
        if not response.headers.get("content-type", "").startswith("text/event-stream"):
            await response.aread()  # a server that ignores `stream` and answers whole
            return response.json()
        return await assemble(EventSource(response).aiter_sse())
