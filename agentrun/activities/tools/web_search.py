"""web_search {query, count?}: titles, URLs and snippets from a search service the worker names.

As the Agentfile's real system, in this order: a SearXNG instance (SEARXNG_URL, e.g. one you run
yourself), Brave Search (BRAVE_API_KEY) or Tavily (TAVILY_API_KEY), read from the worker's
environment (never from the run's history). With none of them the model reads an error that says
so; the step goes on. The operator named the service, so a SearXNG on a private address is fine.
"""

from __future__ import annotations

import os
from typing import Any

import httpx

from agentrun.activities.tools import tls
from agentrun.activities.tools.base import ToolContext, ToolFailed, as_json
from agentrun.models.builtin_tools import WebSearchArgs

TIMEOUT_S = 30.0
NO_SERVICE = (
    "web_search has no search service: the worker needs SEARXNG_URL (a SearXNG instance), "
    "BRAVE_API_KEY (Brave Search) or TAVILY_API_KEY (Tavily) in its environment"
)


async def call(ctx: ToolContext, args: WebSearchArgs) -> str:
    query = args.query.strip()
    if not query:
        raise ToolFailed("the query is empty")
    count = min(10, max(1, args.count))
    searxng, brave, tavily = (os.environ.get(n, "").strip() for n in ("SEARXNG_URL", "BRAVE_API_KEY", "TAVILY_API_KEY"))
    if not (searxng or brave or tavily):
        raise ToolFailed(NO_SERVICE)
    async with httpx.AsyncClient(timeout=TIMEOUT_S, verify=tls.context()) as client:
        try:
            if searxng:
                results = await _searxng(client, searxng, query, count)
            elif brave:
                results = await _brave(client, brave, query, count)
            else:
                results = await _tavily(client, tavily, query, count)
        except httpx.HTTPError as e:
            raise ToolFailed(f"the search service failed: {type(e).__name__}: {e}") from None
    return as_json(results[:count])


async def _searxng(client: httpx.AsyncClient, base: str, query: str, count: int) -> list[dict[str, str]]:
    response = await client.get(
        base.rstrip("/") + "/search",
        params={"q": query, "format": "json", "categories": "general"},
        headers={"Accept": "application/json"},
    )
    data = _json(response, "SearXNG")
    return [_result(r.get("title"), r.get("url"), r.get("content")) for r in data.get("results", [])][:count]


async def _brave(client: httpx.AsyncClient, key: str, query: str, count: int) -> list[dict[str, str]]:
    response = await client.get(
        "https://api.search.brave.com/res/v1/web/search",
        params={"q": query, "count": count},
        headers={"X-Subscription-Token": key, "Accept": "application/json"},
    )
    data = _json(response, "Brave Search")
    found = data.get("web", {}).get("results", [])
    return [_result(r.get("title"), r.get("url"), r.get("description")) for r in found][:count]


async def _tavily(client: httpx.AsyncClient, key: str, query: str, count: int) -> list[dict[str, str]]:
    response = await client.post(
        "https://api.tavily.com/search", json={"api_key": key, "query": query, "max_results": count}
    )
    data = _json(response, "Tavily")
    return [_result(r.get("title"), r.get("url"), r.get("content")) for r in data.get("results", [])][:count]


def _json(response: httpx.Response, service: str) -> dict[str, Any]:
    if response.status_code != 200:
        raise ToolFailed(f"{service} answered HTTP {response.status_code}")
    try:
        data = response.json()
    except ValueError:
        raise ToolFailed(f"{service} did not answer JSON") from None
    if not isinstance(data, dict):
        raise ToolFailed(f"{service} answered something other than a JSON object")
    return data


def _result(title: Any, url: Any, snippet: Any) -> dict[str, str]:
    return {"title": str(title or ""), "url": str(url or ""), "snippet": str(snippet or "")}
