"""A conversation that fits its model: past the model's context window (models.context), the
oldest tool results are cut to their head and a marker before the request is sent. Only the request
is cut: the conversation's store and history keep every result whole, and each turn cuts anew from
the whole conversation, so a model with a larger window set later reads them all again."""

from __future__ import annotations

import json

from agentrun.models.calls import AgentCall, ChatMessage
from agentrun.models.context import tokens, window
from agentrun.models.drivers import driver_of, model_of

HEAD_CHARS = 500  # what the model still reads of a result cut


def fitted(call: AgentCall) -> tuple[AgentCall, int]:
    """The call as it fits its model's window, and how many tool results were cut for it. The
    newest result stays whole: the model asked for it and reads it next."""
    limit = window(model_of(call.uri), call.max_context_tokens) if driver_of(call.uri).chat else None
    if limit is None:
        return call, 0
    size = _chars(call)
    if tokens(size) <= limit:
        return call, 0
    transcript, cut = list(call.transcript), 0
    older = [n for n, m in enumerate(transcript) if m.role == "tool"][:-1]
    for n in older:
        if tokens(size) <= limit:
            break
        shown = _head(transcript[n].content)
        if shown is None:
            continue
        size -= len(transcript[n].content) - len(shown)
        transcript[n], cut = transcript[n].model_copy(update={"content": shown}), cut + 1
    return call.model_copy(update={"transcript": transcript}), cut


def _head(text: str) -> str | None:
    """The head of a tool result and a marker saying what is left out; None if that is no shorter."""
    left = len(text) - HEAD_CHARS
    marker = f"\n[… {left} more characters of this tool result are left out to fit the model's context]"
    return text[:HEAD_CHARS] + marker if left > len(marker) else None


def _chars(call: AgentCall) -> int:
    """What the request carries, in characters: every message, the prompt and the tools offered."""
    said = sum(_message_chars(m) for m in call.transcript) + len(call.prompt)
    return said + sum(len(s.description) + len(json.dumps(s.parameters)) for s in call.offered)


def _message_chars(m: ChatMessage) -> int:
    return len(m.content) + sum(len(c.name) + len(c.arguments) for c in m.tool_calls)
