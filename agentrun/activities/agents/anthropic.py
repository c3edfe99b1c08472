"""anthropic:MODEL — one call to the Anthropic Messages API.

System-role transcript entries go to the top-level `system` field; the API has no system turns.
Secrets come only from the environment (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from httpx_sse import ServerSentEvent
from temporalio.exceptions import ApplicationError

from agentrun.activities import keys, progress
from agentrun.activities.agents import streaming
from agentrun.activities.agents._common import AGENT_UNAVAILABLE, agent_error, http_client
from agentrun.activities.agents.tools import anthropic_tools
from agentrun.lang.agent_uri import AgentUri
from agentrun.models.calls import AgentCall, AgentReply, ChatMessage, ToolCall, Usage
from agentrun.models.drivers import ENDPOINTS

ENDPOINT = ENDPOINTS["anthropic"]
API_VERSION = "2023-06-01"
MAX_TOKENS = 4096


async def send(call: AgentCall) -> AgentReply:
    model = AgentUri.parse(call.uri).rest
    base = ENDPOINT.url()
    async with http_client(call.timeout_s) as client:
        data = await streaming.complete(
            client, f"{base}/v1/messages", _body(call, model), {"stream": True}, _headers(), _assemble
        )
    reply = _reply(data, model)
    progress.shows(reply.text)  # an unstreamed reply arrives whole
    return reply.model_copy(update={"first_token_s": progress.first_token_s()})


# Errors the API may send in the middle of a stream that a later attempt may not meet.
TRANSIENT = frozenset({"overloaded_error", "api_error", "rate_limit_error"})


async def _assemble(events: AsyncIterator[ServerSentEvent]) -> dict[str, Any]:
    """The message a stream of Messages API events adds up to: message_start, then each content
    block's start, deltas and stop, then message_delta (stop reason, output tokens so far) and
    message_stop."""
    message: dict[str, Any] = {}
    blocks: dict[int, dict[str, Any]] = {}
    async for event in events:
        data = json.loads(event.data)
        kind = data.get("type")
        if kind == "message_start":
            message = data["message"]
        elif kind == "content_block_start":
            blocks[int(data["index"])] = {**data["content_block"], "partial_json": ""}
        elif kind == "content_block_delta":
            _add(blocks[int(data["index"])], data["delta"])
        elif kind == "message_delta":
            message.update(data.get("delta") or {})
            message["usage"] = {**(message.get("usage") or {}), **(data.get("usage") or {})}
            progress.counted(int(message["usage"].get("output_tokens") or 0))
        elif kind == "error":
            raise _stream_error(data.get("error") or {})
        elif kind == "message_stop":
            break
    message["content"] = [_finished(blocks[i]) for i in sorted(blocks)]
    return message


def _add(block: dict[str, Any], delta: dict[str, Any]) -> None:
    if delta.get("type") == "text_delta":
        block["text"] = block.get("text", "") + delta["text"]
        progress.wrote(delta["text"], tokens=1)
    elif delta.get("type") == "input_json_delta":
        block["partial_json"] += delta.get("partial_json") or ""


def _finished(block: dict[str, Any]) -> dict[str, Any]:
    """A block as the unstreamed response has it: a tool call's input parsed from its JSON text."""
    partial = block.pop("partial_json")
    if block.get("type") == "tool_use" and partial:
        block["input"] = json.loads(partial)
    return block


def _stream_error(error: dict[str, Any]) -> ApplicationError:
    message = f"anthropic: the stream ended with {error.get('type')}: {error.get('message')}"
    if error.get("type") in TRANSIENT:
        return ApplicationError(message, type=AGENT_UNAVAILABLE, non_retryable=False)
    return agent_error(message)


def _headers() -> dict[str, str]:
    headers = {"anthropic-version": API_VERSION, **keys.as_header()}
    key = ENDPOINT.key()
    if key:
        headers["x-api-key"] = key
    return headers


def _body(call: AgentCall, model: str) -> dict[str, Any]:
    system = [m.content for m in call.transcript if m.role == "system"]
    turns = _turns([m for m in call.transcript if m.role != "system"])
    if call.prompt:
        turns.append({"role": "user", "content": call.prompt})
    body: dict[str, Any] = {"model": model, "max_tokens": MAX_TOKENS, "messages": turns}
    if system:
        body["system"] = "\n\n".join(system)
    if call.tools or call.offered:
        body["tools"] = anthropic_tools(call)
    if call.temperature is not None:
        body["temperature"] = call.temperature
    return body


def _turns(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    """The transcript as Messages API turns: tool calls are `tool_use` blocks of the assistant's
    turn, and the results that answer them `tool_result` blocks of one user turn."""
    turns: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            result = {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content}
            if turns and turns[-1]["role"] == "user" and isinstance(turns[-1]["content"], list):
                turns[-1]["content"].append(result)
            else:
                turns.append({"role": "user", "content": [result]})
        elif m.tool_calls:
            text = [{"type": "text", "text": m.content}] if m.content else []
            uses = [{"type": "tool_use", "id": c.id, "name": c.name, "input": _input(c)} for c in m.tool_calls]
            turns.append({"role": "assistant", "content": text + uses})
        else:
            turns.append({"role": m.role, "content": m.content})
    return turns


def _input(call: ToolCall) -> Any:
    try:
        return json.loads(call.arguments)
    except ValueError:
        return {}  # the model's own malformed call, already answered with an error


def _reply(data: Any, asked_model: str) -> AgentReply:
    blocks = data.get("content") if isinstance(data, dict) else None
    if not isinstance(blocks, list):
        raise agent_error(f"anthropic: response has no content: {str(data)[:300]}")
    texts = [b["text"] for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
    uses = [
        ToolCall(id=str(b.get("id")), name=str(b.get("name")), arguments=json.dumps(b.get("input") or {}))
        for b in blocks
        if isinstance(b, dict) and b.get("type") == "tool_use"
    ]
    if not texts and not uses:
        raise agent_error(f"anthropic: reply has no text block (stop_reason={data.get('stop_reason')})")
    usage = data.get("usage") or {}
    return AgentReply(
        text="".join(texts),
        tool_calls=uses,
        usage=Usage(
            input_tokens=int(usage.get("input_tokens") or 0),
            output_tokens=int(usage.get("output_tokens") or 0),
        ),
        model=str(data.get("model") or asked_model),
    )
