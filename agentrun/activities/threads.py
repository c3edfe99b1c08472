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

from collections import OrderedDict
from typing import Protocol

from temporalio import activity
from temporalio.exceptions import ApplicationError

from agentrun.models.calls import AgentCall, ChatMessage

UNREADABLE = "ConversationUnreadable"
KEPT_LOGS = 16  # logs a worker keeps in memory, the last used


class LogStore(Protocol):
    """Where logs are kept: entries of bytes by owner (`NAMESPACE/WORKFLOW_ID`), log and index."""

    async def write(self, owner: str, log: str, start: int, entries: list[bytes]) -> None: ...

    async def read(self, owner: str, log: str, start: int, stop: int) -> list[bytes]: ...


class _Setting:
    store: LogStore | None = None


_KEPT: OrderedDict[tuple[str, str], list[ChatMessage]] = OrderedDict()


def use(store: LogStore) -> None:
    """The store this process's activities keep conversations in (the worker sets it as it starts)."""
    _Setting.store = store


async def resolved(call: AgentCall) -> AgentCall:
    """The call with its whole transcript, its new messages written to its log; a call that carries
    its transcript itself, as it is."""
    thread = call.thread
    if thread is None:
        return call
    store = _Setting.store
    if store is None:
        raise ApplicationError("no conversation store is set up in this worker", type=UNREADABLE, non_retryable=True)
    info = activity.info()
    owner = f"{info.workflow_namespace}/{info.workflow_id}"
    kept = _KEPT.pop((owner, thread.log), [])[: thread.length]
    if len(kept) < thread.length:
        kept = kept + await _read(store, owner, thread.log, len(kept), thread.length)
    await store.write(owner, thread.log, thread.length, [m.model_dump_json().encode() for m in thread.added])
    messages = kept + thread.added
    _KEPT[(owner, thread.log)] = messages
    while len(_KEPT) > KEPT_LOGS:
        _KEPT.popitem(last=False)
    return call.model_copy(update={"transcript": messages, "thread": None})


async def _read(store: LogStore, owner: str, log: str, start: int, stop: int) -> list[ChatMessage]:
    try:
        entries = await store.read(owner, log, start, stop)
    except (OSError, LookupError, RuntimeError, ValueError) as exc:
        raise ApplicationError(
            f"the conversation {log} of this run cannot be read from its store ({exc})\n"
            "  hint: every worker of a Temporal server must share AGENTRUN_BLOB_URL (or AGENTRUN_STATE_DIR)",
            type=UNREADABLE,
            non_retryable=True,
        ) from None
    return [ChatMessage.model_validate_json(entry) for entry in entries]
