"""A model turn's conversation sent by reference (calls.Thread), so that what history keeps of a
turn stays the same size however long its tool loop runs.

Sent whole, a turn's input was the conversation so far: each turn the previous one plus the last
results, a history quadratic in the loop's length. Here each step keeps logs in the run's store
(written by the run_agent activity, agentrun.activities.threads): a turn whose transcript goes on
from what a log holds names that log, its length, and the messages since; any other opens a new log.
The workflow still holds each transcript whole (tracing reads it); only the activity's input changes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from temporalio import workflow

from agentrun.models import calls
from agentrun.models.tools import ToolResult, ToolSpec

# Runs recorded before this sent each turn's whole transcript in its input.
THREADS = "conversations-by-reference"


@dataclass
class _Log:
    name: str
    logged: list[calls.ChatMessage] = field(default_factory=list)  # what its turns wrote, as far as known
    sent: int = 0  # how many of those the workflow sent; the rest, the prompt and reply the activity added
    tools: list[ToolSpec] | None = None  # what its last turn offered the model, which the log keeps

    def wrote(self, logged: list[calls.ChatMessage], sent: int, tools: list[ToolSpec]) -> None:
        self.logged, self.sent, self.tools = logged, sent, tools


class Threads:
    def __init__(self) -> None:
        self.logs: dict[str, list[_Log]] = {}  # by run key: a step's conversations (sub-agents have their own)
        self.opened = 0
        # Tool results whose content their activity kept in the store, by the id of the message that
        # carries them (the message too, so the id is not reused) until a turn has logged them.
        self.kept: dict[int, tuple[calls.ChatMessage, str]] = {}

    def keeps(self) -> bool:
        """Whether a tool's activity is to keep its result's content in the store."""
        return workflow.patched(THREADS)

    def kept_at(self, message: calls.ChatMessage, result: ToolResult) -> None:
        """`message` answers a call with `result`: named by reference when the store has its content."""
        if result.kept and message.content == result.content:  # a fenced result goes as the model reads it
            self.kept[id(message)] = (message, result.kept)

    def outgoing(self, key: str, call: calls.AgentCall) -> tuple[calls.AgentCall, Callable[[calls.AgentReply], None]]:
        """The call as its activity is sent it, and what to call with its reply (then its messages
        are in the log: a turn that failed may not have written them). A model offered tools gets its
        conversation by reference from its first turn on, any other once it has one."""
        transcript = call.transcript
        if not (transcript or call.offered) or not workflow.patched(THREADS):
            return call, _nothing
        log, have = self._log_for(key, transcript)
        added = [self._entry(m) for m in transcript[have:]]
        same_tools = bool(call.offered) and log.tools == call.offered  # a loop offers the same each turn
        thread = calls.Thread(log=log.name, length=have, added=added, same_tools=same_tools)

        def delivered(reply: calls.AgentReply) -> None:
            # The activity wrote the prompt and the reply after the transcript, as the next turn has them.
            asked = [calls.ChatMessage(role="user", content=call.prompt)] if call.prompt else []
            log.wrote(
                [
                    *transcript,
                    *asked,
                    calls.ChatMessage(role="assistant", content=reply.text, tool_calls=reply.tool_calls),
                ],
                len(transcript),
                call.offered,
            )
            for m in transcript[have:]:
                self.kept.pop(id(m), None)

        sent = {"transcript": [], "thread": thread, **({"offered": []} if same_tools else {})}
        return call.model_copy(update=sent), delivered

    def _entry(self, message: calls.ChatMessage) -> calls.Entry:
        kept = self.kept.get(id(message))
        if kept is None or kept[0] is not message:
            return calls.Entry(message=message)
        return calls.Entry(message=message.model_copy(update={"content": ""}), kept=kept[1])

    def _log_for(self, key: str, transcript: list[calls.ChatMessage]) -> tuple[_Log, int]:
        """The step's log that holds the longest beginning of `transcript` and how much of it, else a
        new one. A log whose added reply the conversation did not go on with is written over from there."""
        logs = self.logs.setdefault(key, [])
        held = [(log, n) for log in logs if (n := _common(transcript, log.logged)) >= log.sent]
        if held:
            return max(held, key=lambda pair: pair[1])
        self.opened += 1
        log = _Log(f"{workflow.info().run_id}-{self.opened}")
        logs.append(log)
        return log, 0


def _common(transcript: list[calls.ChatMessage], logged: list[calls.ChatMessage]) -> int:
    """How many messages both begin with."""
    n = 0
    # The same objects, turn after turn, save for the system message each turn makes anew.
    for a, b in zip(transcript, logged):
        if a is not b and a != b:
            break
        n += 1
    return n


def _nothing(reply: calls.AgentReply) -> None:
    return None
