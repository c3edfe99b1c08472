"""web_fetch {url, question?}: a web page's readable text.

Before connecting, the policy must allow the URL (agentrun.policy: http or https, a host in its
`allow_domains`) and the host resolve to public addresses only (tools.addresses), unless the policy
allows private ones; the connection then goes to the very address that was checked (the Host header and TLS server name stay the host's). Each
redirect is checked again the same way. The worker's proxy settings are not used: a proxy would
connect to whatever the name resolves to there. What is read of a response is capped.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from urllib.parse import urljoin

import httpx

from agentrun.activities.tools import addresses, tls
from agentrun.activities.tools.base import Refused, ToolContext, ToolFailed
from agentrun.activities.tools.html_text import text_of
from agentrun.models.builtin_tools import WebFetchArgs
from agentrun.policy import Asked, decide

MAX_REDIRECTS = 5
TIMEOUT_S = 30.0
_REDIRECTS = (301, 302, 303, 307, 308)
USER_AGENT = "Mozilla/5.0 (compatible; agentrun web_fetch)"


async def call(ctx: ToolContext, args: WebFetchArgs) -> str:
    url = args.url.strip()
    async with httpx.AsyncClient(
        trust_env=False, follow_redirects=False, timeout=TIMEOUT_S, verify=tls.context()
    ) as client:
        for _ in range(MAX_REDIRECTS + 1):
            target = await checked(ctx, url)
            async with _connected(client, target) as response:
                if response.status_code in _REDIRECTS and "location" in response.headers:
                    url = urljoin(url, response.headers["location"])
                    continue
                if response.status_code >= 400:
                    raise ToolFailed(f"fetching {url} failed: HTTP {response.status_code}")
                body = await _read(response, ctx.policy.limits.fetch_bytes)
                return _as_text(response, body)
    raise ToolFailed(f"fetching {url}: more than {MAX_REDIRECTS} redirects")


@contextlib.asynccontextmanager
async def _connected(client: httpx.AsyncClient, target: _Target) -> AsyncIterator[httpx.Response]:
    """The response from the first checked address that takes the connection (a name may have an
    IPv6 address a server does not listen on, then an IPv4 one it does)."""
    failed: httpx.ConnectError | None = None
    for url in target.urls:
        request = client.build_request(
            "GET",
            url,
            headers={
                "Host": target.host_header,
                "User-Agent": USER_AGENT,
                "Accept": "text/html,text/*;q=0.9,*/*;q=0.5",
            },
            extensions={"sni_hostname": target.host} if target.scheme == "https" else {},
        )
        try:
            response = await client.send(request, stream=True)
        except httpx.ConnectError as e:
            failed = e
            continue
        try:
            yield response
        finally:
            await response.aclose()
        return
    raise ToolFailed(f"cannot connect to {target.host_header}: {failed}")


class _Target:
    """A URL with its host replaced by the checked address, and what the request still says of the host."""

    def __init__(self, url: httpx.URL, addresses: list[str]):
        self.scheme = url.scheme
        self.host = url.host
        self.host_header = url.netloc.decode("ascii")
        self.urls = [url.copy_with(host=address) for address in addresses]


async def checked(ctx: ToolContext, url: str) -> _Target:
    """The URL to connect to, with the address checked for it, or a refusal saying why not."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as e:
        raise ToolFailed(f"not a URL: {url} ({e})") from None
    decision = decide(ctx.policy, Asked("builtin", ctx.name, {"url": url}))
    if decision.refused:  # "ask": the workflow had a person approve it first
        raise Refused(decision.reason)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    found = await addresses.resolve(parsed.host, port, allow_private=ctx.policy.allow_private)
    return _Target(parsed, found)


async def _read(response: httpx.Response, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size >= limit:
            break
    return b"".join(chunks)[:limit]


def _as_text(response: httpx.Response, body: bytes) -> str:
    kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
    text = body.decode(response.encoding or "utf-8", errors="replace")
    if "html" in kind or (not kind and text.lstrip().startswith("<")):
        return text_of(text)
    if kind and not (kind.startswith("text/") or kind.endswith(("json", "xml", "javascript", "yaml"))):
        return f"[the page is {kind}, {len(body)} bytes: not text]"
    return text
