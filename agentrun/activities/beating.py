"""A background heartbeat for an activity that runs a model's tool call, and what the model is told
of an attempt that is not the first.

While the call runs, its activity beats every second (the SDK sends at most one beat a second to the
server), so a worker killed in the middle of a call is noticed within the call's heartbeat timeout
and the call is attempted again on another worker, under the same idempotency key."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable

from temporalio import activity

from agentrun.models.tools import ToolResult

EVERY_S = 1.0
RAN_AGAIN = "[ran again after the worker running it stopped; the first attempt may have partly run]"


@contextlib.asynccontextmanager
async def beating() -> AsyncIterator[None]:
    task = asyncio.create_task(_beat_forever())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _beat_forever() -> None:
    # The heartbeat timeout runs from the attempt's start, so the first beat can wait: a call that
    # ends within a second (most reads, edits, greps) costs no heartbeat call to the server.
    while True:
        await asyncio.sleep(EVERY_S)
        activity.heartbeat()


def attempt() -> int:
    """This attempt's number: 1, or more when an earlier attempt's worker stopped or ran out of time."""
    return activity.info().attempt


def told(content: str, attempt: int) -> str:
    """A result as the model reads it: said plainly at its head when the call ran again."""
    return f"{RAN_AGAIN}\n{content}" if attempt > 1 else content


async def answered(work: Awaitable[ToolResult]) -> ToolResult:
    """A tool call's result, heartbeating while `work` runs, marked with its attempt and said plainly
    at its head when the call ran again: what every tool-call activity returns."""
    async with beating():
        result = await work
    result.attempt = attempt()
    result.content = told(result.content, result.attempt)
    return result
