"""openai:MODEL — one chat completion from an OpenAI-compatible server.

The protocol is stateless, so the conversation so far travels in call.transcript.
Secrets come only from the environment (OPENAI_API_KEY, OPENAI_BASE_URL), never from the spec.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from httpx_sse import ServerSentEvent

from agentrun.activities import keys, progress
from agentrun.activities.agents import streaming
from agentrun.activities.agents._common import agent_error, http_client
from agentrun.activities.agents.tools import openai_tools
from agentrun.lang.agent_uri import AgentUri
from agentrun.models.calls import AgentCall, AgentReply, ChatMessage, ToolCall, Usage
from agentrun.models.drivers import ENDPOINTS

ENDPOINT = ENDPOINTS["openai"]


async def send(call: AgentCall) -> AgentReply:
    model = AgentUri.parse(call.uri).rest
    base = ENDPOINT.url()
    body: dict[str, Any] = {"model": model, "messages": _messages(call)}
    if call.tools or call.offered:
        body["tools"] = openai_tools(call)
    if call.temperature is not None:
        body["temperature"] = call.temperature
    url = f"{base}/chat/completions"
    async with http_client(call.timeout_s) as client:
        data = await streaming.complete(client, url, body, STREAMED, _headers(), _assemble)
    if data.pop(_STREAMED_WITHOUT_USAGE, False):
        streaming.stop_streaming(url, "its stream carried no token usage")
    reply = _reply(data, model)
    progress.shows(reply.text)  # an unstreamed reply arrives whole
    return reply.model_copy(update={"first_token_s": progress.first_token_s()})


# Usage comes in a last chunk of its own only when asked for.
STREAMED: dict[str, Any] = {"stream": True, "stream_options": {"include_usage": True}}
_STREAMED_WITHOUT_USAGE = "agentrun_no_usage"


async def _assemble(events: AsyncIterator[ServerSentEvent]) -> dict[str, Any]:
    """The chat.completion a stream of chat.completion.chunk events adds up to."""
    text: list[str] = []
    said = False  # whether any chunk had content, even empty (a tool call alone has none)
    calls: dict[int, dict[str, Any]] = {}
    data: dict[str, Any] = {}
    finish = None
    async for event in events:
        if event.data.strip() == "[DONE]":
            break
        chunk = json.loads(event.data)
        if isinstance(chunk.get("error"), dict):
            raise agent_error(f"openai: the stream ended with an error: {chunk['error'].get('message')}")
        data["model"] = chunk.get("model") or data.get("model")
        if chunk.get("usage"):
            data["usage"] = chunk["usage"]
            progress.counted(int(chunk["usage"].get("completion_tokens") or 0))
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                said = True
                text.append(delta["content"])
                progress.wrote(delta["content"], tokens=1 if delta["content"] else 0)
            for piece in delta.get("tool_calls") or []:
                _add_call(calls.setdefault(int(piece.get("index") or 0), {}), piece)
            finish = choice.get("finish_reason") or finish
    message = {"content": "".join(text) if said else None, "tool_calls": [calls[i] for i in sorted(calls)]}
    data["choices"] = [{"message": message, "finish_reason": finish}]
    data[_STREAMED_WITHOUT_USAGE] = "usage" not in data
    return data


def _add_call(call: dict[str, Any], piece: dict[str, Any]) -> None:
    """A tool call's id and name come in its first piece, its arguments' text across all of them."""
    function = piece.get("function") or {}
    if piece.get("id"):
        call["id"] = piece["id"]
    entry = call.setdefault("function", {"name": "", "arguments": ""})
    entry["name"] += function.get("name") or ""
    entry["arguments"] += function.get("arguments") or ""


def _headers() -> dict[str, str]:
    key = ENDPOINT.key()
    # The step's Idempotency-Key, the same on a retry: for a gateway that deduplicates by it.
    return {**keys.as_header(), **({"Authorization": f"Bearer {key}"} if key else {})}


def _messages(call: AgentCall) -> list[dict[str, Any]]:
    earlier = [_message(m) for m in call.transcript]
    return [*earlier, {"role": "user", "content": call.prompt}] if call.prompt else earlier


def _message(m: ChatMessage) -> dict[str, Any]:
    if m.role == "tool":
        return {"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content}
    if m.role == "assistant" and m.tool_calls:
        calls = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in m.tool_calls
        ]
        return {"role": "assistant", "content": m.content or None, "tool_calls": calls}
    return {"role": m.role, "content": m.content}


def _reply(data: Any, asked_model: str) -> AgentReply:
    try:
        choice = data["choices"][0]
    except (KeyError, IndexError, TypeError):
        raise agent_error(f"openai: response has no choices: {str(data)[:300]}") from None
    message = choice.get("message") or {}
    content, calls = message.get("content"), _tool_calls(message.get("tool_calls"))
    if not isinstance(content, str) and not calls:
        reason = choice.get("finish_reason")
        raise agent_error(f"openai: reply has no text content (finish_reason={reason})")
    usage = data.get("usage") or {}
    return AgentReply(
        text=content if isinstance(content, str) else "",
        tool_calls=calls,
        usage=Usage(
            input_tokens=int(usage.get("prompt_tokens") or 0),
            output_tokens=int(usage.get("completion_tokens") or 0),
        ),
        model=str(data.get("model") or asked_model),
    )


def _tool_calls(raw: Any) -> list[ToolCall]:
    """The function calls of a reply; anything else in the list is a protocol violation."""
    calls = []
    for item in raw or []:
        function = item.get("function") if isinstance(item, dict) else None
        if not isinstance(function, dict) or not isinstance(item.get("id"), str):
            raise agent_error(f"openai: a tool call without an id or function: {str(item)[:300]}")
        calls.append(
            ToolCall(id=item["id"], name=str(function.get("name")), arguments=str(function.get("arguments") or "{}"))
        )
    return calls
