"""anthropic:MODEL — one call to the Anthropic Messages API.

System-role transcript entries go to the top-level `system` field; the API has no system turns.
Secrets come only from the environment (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL).
"""

from __future__ import annotations

import os
from typing import Any

from activities.agents._common import agent_error, http_client, scheme_rest
from spec.calls import AgentCall, AgentReply, Usage

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
MAX_TOKENS = 4096


async def send(call: AgentCall) -> AgentReply:
    model = scheme_rest(call.uri)
    base = (os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
    async with http_client(call.timeout_s) as client:
        response = await client.post(f"{base}/v1/messages", json=_body(call, model), headers=_headers())
        response.raise_for_status()
        return _reply(response.json(), model)


def _headers() -> dict[str, str]:
    headers = {"anthropic-version": API_VERSION}
    key = os.environ.get("ANTHROPIC_API_KEY")
    if key:
        headers["x-api-key"] = key
    return headers


def _body(call: AgentCall, model: str) -> dict[str, Any]:
    system = [m.content for m in call.transcript if m.role == "system"]
    turns = [{"role": m.role, "content": m.content} for m in call.transcript if m.role != "system"]
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": MAX_TOKENS,
        "messages": [*turns, {"role": "user", "content": call.prompt}],
    }
    if system:
        body["system"] = "\n\n".join(system)
    return body


def _reply(data: Any, asked_model: str) -> AgentReply:
    blocks = data.get("content") if isinstance(data, dict) else None
    if not isinstance(blocks, list):
        raise agent_error(f"anthropic: response has no content: {str(data)[:300]}")
    texts = [b["text"] for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
    if not texts:
        raise agent_error(f"anthropic: reply has no text block (stop_reason={data.get('stop_reason')})")
    usage = data.get("usage") or {}
    return AgentReply(
        text="".join(texts),
        usage=Usage(
            input_tokens=int(usage.get("input_tokens") or 0),
            output_tokens=int(usage.get("output_tokens") or 0),
        ),
        model=str(data.get("model") or asked_model),
    )
