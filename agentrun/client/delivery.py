"""Getting an answer to a run whose worker may be gone: wait until a worker holds the run and send it
as an update, or queue it as a signal in the run's history for whichever worker takes the run next.

An update is sent only once a worker has answered a query for the run. One sent to a run no worker
holds waits at the server, and can still be applied after the sender gave up and told the person
that nothing was recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

from temporalio.client import Client, WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.service import RPCError

from agentrun import spelling
from agentrun.client.runs import QUERY_S, NoWorker, RunHandle, UsageError, ask_held, ask_state, running
from agentrun.explain.waiting import worker_command
from agentrun.models import limits
from agentrun.models.contract import RunState

LOG = logging.getLogger("agentrun.client")
T = TypeVar("T")
S = TypeVar("S")

WAIT_NOTICE_S = 1.5  # a worker that holds the run takes an answer well within this
# A worker that has just answered for the run takes the update that follows at once; this much is
# allowed for it even when --wait is nearly spent.
UPDATE_GRACE_S = 15.0


async def when_held(
    client: Client,
    handle: RunHandle,
    queue: str,
    wait_s: float,
    what: str,
    send: Callable[[RunState], Awaitable[T]],
) -> T:
    """Wait up to wait_s for a worker to hold the run (its state query goes through), then send;
    NoWorker if none came, with nothing sent. `what` names it for the person: "the answer"."""
    return await _when(client, handle, queue, wait_s, what, ask_state, send)


async def when_alive(
    client: Client, handle: RunHandle, queue: str, wait_s: float, what: str, send: Callable[[], Awaitable[T]]
) -> T:
    """when_held for what needs no look at the state first: the worker is asked only for the run's
    status, so it does not store the (possibly large) state once per thing sent."""
    return await _when(client, handle, queue, wait_s, what, ask_held, lambda _status: send())


async def _when(
    client: Client,
    handle: RunHandle,
    queue: str,
    wait_s: float,
    what: str,
    probe: Callable[[RunHandle, float], Awaitable[S | None]],
    send: Callable[[S], Awaitable[T]],
) -> T:
    deadline = time.monotonic() + wait_s
    with _notice(f"waiting for a worker to take {what}…"):
        state = await _state_within(handle, deadline, probe)
        if state is None:
            await running(client, handle.id)  # a run that ended meanwhile is reported as such
            raise NoWorker(
                f"no worker took {what} for run {handle.id} within {wait_s:g}s: nothing was recorded\n"
                f"  hint: start a worker with `{worker_command(queue)}` and send it again, or add --no-wait "
                "to queue it for the next worker"
            )
        try:
            return await asyncio.wait_for(send(state), max(deadline - time.monotonic(), UPDATE_GRACE_S))
        except (TimeoutError, WorkflowUpdateRPCTimeoutOrCancelledError):
            # The worker that answered went away before taking it; the server may keep it for the next.
            raise NoWorker(
                f"a worker held run {handle.id} but did not take {what}; it may still be taken when a worker "
                f"holds the run again: check with `{spelling.client()} status {handle.id}` before sending it again"
            ) from None


async def enqueue(handle: RunHandle, signal: str, arg: Any, what: str) -> None:
    """Write it to the run's history as a signal; the run checks it when a worker takes it."""
    if (refused := limits.refusal(arg)) is not None:
        raise UsageError(refused)
    try:
        await handle.signal(signal, arg)
    except RPCError as exc:  # e.g. the run ended between our check and the signal
        raise UsageError(f"run {handle.id} did not take {what}: {exc.message}") from None


async def _state_within(
    handle: RunHandle, deadline: float, probe: Callable[[RunHandle, float], Awaitable[S | None]]
) -> S | None:
    while (left := deadline - time.monotonic()) > 0:
        state = await probe(handle, min(left, QUERY_S))
        if state:
            return state
        await asyncio.sleep(min(0.5, max(deadline - time.monotonic(), 0)))  # a query refused at once must not spin
    return None


@contextlib.contextmanager
def _notice(line: str) -> Iterator[None]:
    """Say once that we are waiting, when what we wait for has not come after WAIT_NOTICE_S: to the
    `agentrun.client` logger, which the command line prints on stderr and a program may route."""
    timer = asyncio.get_running_loop().call_later(WAIT_NOTICE_S, lambda: LOG.info(line))
    try:
        yield
    finally:
        timer.cancel()
