"""A step's conversation as an append-only log in the run's store, each message written once.

A model turn's input names its conversation by reference (calls.Thread): the log, how many messages
earlier turns wrote to it, and the few messages since. The run_agent activity writes those at their
places, reads the rest, and asks the model with the whole conversation, exactly as if the workflow
had sent it. History keeps a constant per turn; the store grows by the new messages only.

Each message is an entry of its own, named by its log and index, so a retried turn writes the same
entries again instead of adding to them. A worker keeps the logs it wrote or read last in memory:
the next turn of a loop, most often on the same worker, reads nothing.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Protocol

from pydantic import TypeAdapter
from temporalio import activity
from temporalio.exceptions import ApplicationError

from agentrun.models.calls import AgentCall, AgentReply, ChatMessage, Entry, Thread
from agentrun.models.tools import ToolSpec

UNREADABLE = "ConversationUnreadable"
KEPT_LOGS = 16  # logs a worker keeps in memory, the last used


class LogStore(Protocol):
    """Where logs are kept: entries of bytes by owner (`NAMESPACE/WORKFLOW_ID`), log and index."""

    async def write(self, owner: str, log: str, start: int, entries: list[bytes]) -> None: ...

    async def read(self, owner: str, log: str, start: int, stop: int) -> list[bytes]: ...


class _Setting:
    store: LogStore | None = None


_LOGS: OrderedDict[tuple[str, str], list[ChatMessage]] = OrderedDict()
_TOOLS: dict[tuple[str, str], list[ToolSpec]] = {}  # the tools each log's turns offer
_TOOL_LIST = TypeAdapter(list[ToolSpec])
TOOLS = "-tools"


def use(store: LogStore) -> None:
    """The store this process's activities keep conversations in (the worker sets it as it starts)."""
    _Setting.store = store


async def resolved(call: AgentCall) -> AgentCall:
    """The call with its whole transcript, its new messages written to its log; a call that carries
    its transcript itself, as it is."""
    thread = call.thread
    if thread is None:
        return call
    store, owner = _store(), _owner()
    known = _LOGS.pop((owner, thread.log), [])[: thread.length]
    if len(known) < thread.length:
        known = known + await _read(store, owner, thread.log, len(known), thread.length)
    await store.write(owner, thread.log, thread.length, [_entry(e) for e in thread.added])
    messages = known + await _messages(store, owner, thread.added)
    _LOGS[(owner, thread.log)] = messages
    while len(_LOGS) > KEPT_LOGS:
        _LOGS.popitem(last=False)
    offered = await _offered(store, owner, thread, call.offered)
    return call.model_copy(update={"transcript": messages, "thread": None, "offered": offered})


async def _offered(store: LogStore, owner: str, thread: Thread, offered: list[ToolSpec]) -> list[ToolSpec]:
    """The tools the model is offered: the turn's own, which the log keeps for the turns after it,
    or the ones it kept."""
    log = f"{thread.log}{TOOLS}"
    if thread.same_tools:
        if (owner, log) not in _TOOLS:
            (kept,) = await _get(store, owner, log, 0, 1)
            _TOOLS[(owner, log)] = _TOOL_LIST.validate_json(kept)
        return _TOOLS[(owner, log)]
    if offered and _TOOLS.get((owner, log)) != offered:
        await store.write(owner, log, 0, [_TOOL_LIST.dump_json(offered)])
        _TOOLS[(owner, log)] = offered
        while len(_TOOLS) > KEPT_LOGS:
            _TOOLS.pop(next(iter(_TOOLS)))
    return offered


async def replied(thread: Thread, call: AgentCall, reply: AgentReply) -> None:
    """Write the prompt and the reply after the turn's transcript, as the next turn goes on from
    them (workflows.threads expects them there)."""
    owner, at = _owner(), thread.length + len(thread.added)
    asked = [ChatMessage(role="user", content=call.prompt)] if call.prompt else []
    said = [*asked, ChatMessage(role="assistant", content=reply.text, tool_calls=reply.tool_calls)]
    await _store().write(owner, thread.log, at, [_entry(Entry(message=m)) for m in said])
    _LOGS[(owner, thread.log)] = [*call.transcript, *said]


def _entry(entry: Entry) -> bytes:
    return entry.model_dump_json(exclude_defaults=True).encode()


async def keep(key: str, content: str) -> str:
    """Keep a tool result's content in the store (a retried call keeps it again, in the same place);
    the name the model's next turn gives it, or '' in a process that has no store (it goes inline)."""
    if _Setting.store is None:
        return ""
    name = hashlib.sha256(f"{activity.info().workflow_run_id}/{key}".encode()).hexdigest()[:24]
    await _store().write(_owner(), _result_log(name), 0, [content.encode()])
    return name


RESULTS = "results"


def _result_log(name: str) -> str:
    return f"{RESULTS}-{name}"


def _store() -> LogStore:
    if _Setting.store is None:
        raise ApplicationError("no conversation store is set up in this worker", type=UNREADABLE, non_retryable=True)
    return _Setting.store


def _owner() -> str:
    info = activity.info()
    return f"{info.workflow_namespace}/{info.workflow_id}"


async def _messages(store: LogStore, owner: str, entries: list[Entry]) -> list[ChatMessage]:
    """The entries' messages, each kept tool result's content read back from the store."""
    out = []
    for entry in entries:
        if entry.kept:
            content = (await _get(store, owner, _result_log(entry.kept), 0, 1))[0].decode()
            out.append(entry.message.model_copy(update={"content": content}))
        else:
            out.append(entry.message)
    return out


async def _read(store: LogStore, owner: str, log: str, start: int, stop: int) -> list[ChatMessage]:
    entries = [Entry.model_validate_json(e) for e in await _get(store, owner, log, start, stop)]
    return await _messages(store, owner, entries)


async def _get(store: LogStore, owner: str, log: str, start: int, stop: int) -> list[bytes]:
    try:
        return await store.read(owner, log, start, stop)
    except (FileNotFoundError, LookupError) as exc:  # gone: asking again will not bring it back
        raise ApplicationError(
            f"the conversation {log} of this run cannot be read from its store ({exc})\n"
            "  hint: every worker of a Temporal server must share AGENTRUN_BLOB_URL (or AGENTRUN_STATE_DIR)",
            type=UNREADABLE,
            non_retryable=True,
        ) from None
