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

# Runs recorded before this sent each turn's whole transcript in its input.
THREADS = "conversations-by-reference"


@dataclass
class _Log:
    name: str
    logged: list[calls.ChatMessage] = field(default_factory=list)  # what its turns wrote, delivered


class Threads:
    def __init__(self) -> None:
        self.logs: dict[str, list[_Log]] = {}  # by run key: a step's conversations (sub-agents have their own)
        self.opened = 0

    def outgoing(self, key: str, call: calls.AgentCall) -> tuple[calls.AgentCall, Callable[[], None]]:
        """The call as its activity is sent it, and what to call once it was answered (then its
        messages are in the log: a turn that failed may not have written them)."""
        transcript = call.transcript
        if not transcript or not workflow.patched(THREADS):
            return call, _nothing
        log = self._log_for(key, transcript)
        have = len(log.logged)
        thread = calls.Thread(log=log.name, length=have, added=transcript[have:])

        def delivered() -> None:
            log.logged = transcript

        return call.model_copy(update={"transcript": [], "thread": thread}), delivered

    def _log_for(self, key: str, transcript: list[calls.ChatMessage]) -> _Log:
        """The step's log that holds the longest beginning of `transcript`, else a new one."""
        logs = self.logs.setdefault(key, [])
        going_on = [log for log in logs if _opens_with(transcript, log.logged)]
        if going_on:
            return max(going_on, key=lambda log: len(log.logged))
        self.opened += 1
        log = _Log(f"{workflow.info().run_id}-{self.opened}")
        logs.append(log)
        return log


def _opens_with(transcript: list[calls.ChatMessage], logged: list[calls.ChatMessage]) -> bool:
    if len(logged) > len(transcript):
        return False
    # The same objects, turn after turn, save for the system message each turn makes anew.
    return all(a is b or a == b for a, b in zip(transcript, logged))


def _nothing() -> None:
    return None
