"""What a running agent call has written so far, kept small for its heartbeats.

Drivers report the reply as it arrives through the module functions (`wrote`, `shows`,
`counted`, `status`); the run_agent activity owns the record (`tracking`) and heartbeats it.
Outside an activity the functions do nothing, so a driver runs the same anywhere.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar

from opentelemetry import trace

from agentrun.models import telemetry as names
from agentrun.models.calls import PARTIAL_CHARS, AgentCall, Partial

FIRST_TOKEN_EVENT = "agentrun.first_token"
# Kept beyond what a record shows, so a secret cut by the record's start is still seen whole.
MARGIN = 512
KEPT = PARTIAL_CHARS + MARGIN


class Progress:
    """The reply so far of one attempt of one agent call; `version` counts its changes."""

    def __init__(self, call: AgentCall, attempt: int = 1) -> None:
        self.task, self.agent, self.attempt = call.task_id, call.agent_id, attempt
        self.started = self.last_output = time.monotonic()
        self.tail, self.chars, self.tokens = "", 0, 0
        self.state = "waiting"
        self.first_token_s: float | None = None
        self.version = 0

    def wrote(self, delta: str, tokens: int = 0) -> None:
        if not delta and not tokens:
            return
        self._output()
        self.tail = (self.tail + delta)[-KEPT:]
        self.chars += len(delta)
        self.tokens += tokens

    def shows(self, text: str) -> None:
        if len(text) == self.chars and text.endswith(self.tail):
            return  # the same message again
        self._output()
        self.tail, self.chars = text[-KEPT:], len(text)

    def counted(self, output_tokens: int) -> None:
        if output_tokens != self.tokens:
            self.tokens = output_tokens
            self.version += 1

    def status(self, state: str) -> None:
        if state != self.state:
            self.state = state
            self.version += 1

    def record(self, clean: Callable[[str], str] = str) -> Partial:
        """The record a heartbeat carries; `clean` is applied to the text before it is cut."""
        now = time.monotonic()
        return Partial(
            task=self.task,
            agent=self.agent,
            attempt=self.attempt,
            tail=clean(self.tail)[-PARTIAL_CHARS:],
            chars=self.chars,
            tokens=self.tokens,
            elapsed_s=round(now - self.started, 1),
            quiet_s=round(now - self.last_output, 1),
            status=self.state,
            first_token_s=self.first_token_s,
        )

    def _output(self) -> None:
        self.last_output = time.monotonic()
        self.version += 1
        if self.first_token_s is None:
            self.first_token_s = round(self.last_output - self.started, 3)
            if self.state == "waiting":
                self.state = "writing"
            # The GenAI conventions' attribute, on the attempt's span (a no-op without tracing).
            span = trace.get_current_span()
            span.add_event(FIRST_TOKEN_EVENT, {names.TIME_TO_FIRST_CHUNK: self.first_token_s, names.AGENT: self.agent})
            span.set_attribute(names.TIME_TO_FIRST_CHUNK, self.first_token_s)


_current: ContextVar[Progress | None] = ContextVar("agentrun_progress", default=None)


@contextlib.contextmanager
def tracking(call: AgentCall, attempt: int = 1) -> Iterator[Progress]:
    """Collect what the drivers report while the block runs."""
    progress = Progress(call, attempt)
    token = _current.set(progress)
    try:
        yield progress
    finally:
        _current.reset(token)


def wrote(delta: str, tokens: int = 0) -> None:
    """A piece of the reply arrived (`tokens`: how many output tokens it is, if known)."""
    if (progress := _current.get()) is not None:
        progress.wrote(delta, tokens)


def shows(text: str) -> None:
    """The whole reply so far, for an agent that rewrites its last message as it works."""
    if (progress := _current.get()) is not None:
        progress.shows(text)


def counted(output_tokens: int) -> None:
    """The model's own count of the output tokens so far."""
    if (progress := _current.get()) is not None:
        progress.counted(output_tokens)


def status(state: str) -> None:
    """The agent's own status, when it reports one."""
    if (progress := _current.get()) is not None:
        progress.status(state)


def first_token_s() -> float | None:
    progress = _current.get()
    return progress.first_token_s if progress is not None else None
