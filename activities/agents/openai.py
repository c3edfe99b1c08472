"""openai:MODEL — one chat completion from an OpenAI-compatible server.

The protocol is stateless, so the conversation so far travels in call.transcript.
Secrets come only from the environment (OPENAI_API_KEY, OPENAI_BASE_URL), never from the spec.
"""

from __future__ import annotations

import os
from typing import Any

from activities.agents._common import agent_error, http_client, scheme_rest
from spec.calls import AgentCall, AgentReply, Usage

DEFAULT_BASE_URL = "https://api.openai.com/v1"


async def send(call: AgentCall) -> AgentReply:
    model = scheme_rest(call.uri)
    base = (os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
    body = {"model": model, "messages": _messages(call)}
    async with http_client(call.timeout_s) as client:
        response = await client.post(f"{base}/chat/completions", json=body, headers=_headers())
        response.raise_for_status()
        return _reply(response.json(), model)


def _headers() -> dict[str, str]:
    key = os.environ.get("OPENAI_API_KEY")
    return {"Authorization": f"Bearer {key}"} if key else {}


def _messages(call: AgentCall) -> list[dict[str, str]]:
    earlier = [{"role": m.role, "content": m.content} for m in call.transcript]
    return [*earlier, {"role": "user", "content": call.prompt}]


def _reply(data: Any, asked_model: str) -> AgentReply:
    try:
        choice = data["choices"][0]
    except (KeyError, IndexError, TypeError):
        raise agent_error(f"openai: response has no choices: {str(data)[:300]}") from None
    content = (choice.get("message") or {}).get("content")
    if not isinstance(content, str):
        reason = choice.get("finish_reason")
        raise agent_error(f"openai: reply has no text content (finish_reason={reason})")
    usage = data.get("usage") or {}
    return AgentReply(
        text=content,
        usage=Usage(
            input_tokens=int(usage.get("prompt_tokens") or 0),
            output_tokens=int(usage.get("completion_tokens") or 0),
        ),
        model=str(data.get("model") or asked_model),
    )
