"""Calling activities from the workflow with the engine's timeouts and retry policy."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RawValue, RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, RetryState, TimeoutError

from agentrun.models.builtin_tools import ToolSettings
from agentrun.models.contract import ARGUMENTS_SHOWN
from agentrun.models.tools import ToolCall
from agentrun.workflows import metrics, sizes, tracing
from agentrun.workflows.failures import CallNotCompleted, TaskFailed

T = TypeVar("T")

# Transport errors (connection, 408/409/429/5xx) are retried here; the drivers mark the rest
# non-retryable, so a wrong prompt or a bad key fails at once instead of five times.
RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=5,
    non_retryable_error_types=["AgentError"],
)


async def call(
    name: str, arg: Any, result_type: type[T], *, summary: str, timeout_s: float, heartbeat_s: float | None = None
) -> T:
    return await workflow.execute_activity(
        name,
        arg,
        result_type=result_type,
        start_to_close_timeout=timedelta(seconds=timeout_s),
        # The timeout bounds the whole call, transport retries included: a step's timeout is its own.
        schedule_to_close_timeout=timedelta(seconds=timeout_s),
        heartbeat_timeout=timedelta(seconds=heartbeat_s) if heartbeat_s else None,
        retry_policy=RETRY,
        summary=summary[:200],
        activity_id=_activity_id(summary) if workflow.patched(NAMED_ACTIVITY_IDS) else None,
    )


NAMED_ACTIVITY_IDS = "activity-ids-name-steps"


def not_completed(key: str, n: int, call: ToolCall, exc: ActivityError, settings: ToolSettings) -> BaseException:
    """What step `key` is told of its n-th tool call when every attempt ended without a result (its
    workers stopped, or its time ran out): it fails naming the call. A cancellation is the branch's."""
    if isinstance(exc.cause, CancelledError):
        return asyncio.CancelledError()  # the run or this branch was cancelled
    exhausted = exc.retry_state == RetryState.MAXIMUM_ATTEMPTS_REACHED
    shown = json.dumps(call.arguments, ensure_ascii=False)[:ARGUMENTS_SHOWN]
    tried = f"after {settings.attempts} attempts" if exhausted else "within its time"
    said = f"tool call {n} of the step, {call.name} {shown}, could not be completed {tried} ({reason(exc)}); it may have partly run"
    return CallNotCompleted(key, said, attempts=settings.attempts if exhausted else 1)


async def call_tool(
    name: str,
    arg: Any,
    result_type: type[T],
    settings: ToolSettings,
    *,
    limit_s: float,
    summary: str,
    task_queue: str | None = None,
) -> T:
    """One tool call as its declaration says (models.builtin_tools.ToolSettings): each attempt
    heartbeating, so a worker that dies is noticed within seconds and the call runs again on
    another, as many times as declared, within a schedule-to-close that leaves room for them all.
    `task_queue`: where the workers that have the tool poll (a host tool's own), else the run's."""
    return await workflow.execute_activity(
        name,
        arg,
        result_type=result_type,
        task_queue=task_queue,
        start_to_close_timeout=timedelta(seconds=settings.start_to_close_s(limit_s)),
        schedule_to_close_timeout=timedelta(seconds=settings.schedule_to_close_s(limit_s)),
        heartbeat_timeout=timedelta(seconds=settings.heartbeat_s),
        retry_policy=RetryPolicy(
            initial_interval=timedelta(seconds=settings.backoff_s),
            backoff_coefficient=2.0,
            maximum_attempts=settings.attempts,
        ),
        summary=summary[:200],
        activity_id=_activity_id(summary) if workflow.patched(NAMED_ACTIVITY_IDS) else None,
    )


def _activity_id(summary: str) -> str:
    """Temporal Web's pending-activity card shows an activity's id, not its summary: a number that
    keeps ids unique in the run, and the step (`3: build — round 2`)."""
    run = workflow.instance()
    run.activities_scheduled += 1
    return f"{run.activities_scheduled}: {summary}"[:200]


def reason(exc: BaseException) -> str:
    """The message a person should read for a failed activity."""
    cause = exc.cause if isinstance(exc, ActivityError) else exc
    while isinstance(cause, ActivityError) and cause.cause is not None:
        cause = cause.cause
    if isinstance(cause, TimeoutError) and cause.type is not None:
        return f"timed out ({cause.type.name.lower().replace('_', '-')})"
    if isinstance(cause, ApplicationError):
        return cause.message
    return str(cause) if cause else str(exc)


async def perform(
    key: str,
    name: str,
    arg: Any,
    result_type: type[T],
    *,
    summary: str,
    timeout_s: float,
    heartbeat_s: float | None = None,
    who: str = "",
) -> T:
    """`call`, with a failure as the node's TaskFailed and a cancellation as the branch's. A
    timeout names its limit and, given `who` ("agent 'writer'"), what did not answer. An input Temporal
    could not carry (a conversation's transcript grown past the limit) fails the node instead of the
    run's workflow task."""
    payload = sizes.payload_of(arg)
    size = payload.ByteSize()
    limit = sizes.sent_limit(size)
    if limit is not None:
        raise TaskFailed(
            key,
            f"what {name} would be sent is {sizes.megabytes(size)}, over the {sizes.megabytes(limit)} a step may send",
        )
    with tracing.activity(name, key):
        try:
            # Sent as the payload just measured: the converter would serialise `arg` a second time.
            sent = RawValue(payload)
            return await call(name, sent, result_type, summary=summary, timeout_s=timeout_s, heartbeat_s=heartbeat_s)
        except ActivityError as exc:
            if isinstance(exc.cause, CancelledError):
                raise asyncio.CancelledError() from None  # the run or this branch was cancelled
            metrics.failed(_failure_kind(exc))
            if _timed_out(exc):
                late = f"no reply from {who} within {timeout_s:g}s" if who else f"no result within {timeout_s:g}s"
                raise TaskFailed(key, f"{reason(exc)}: {late}") from None
            raise TaskFailed(key, reason(exc)) from None


# The error types the agent driver raises, as failure kinds people count.
_KINDS = {"AgentUnavailable": "transport", "AgentError": "agent"}


def _failure_kind(exc: ActivityError) -> str:
    """timeout, transport (retried until the policy gave up), agent, or activity (anything else)."""
    if _timed_out(exc):
        return "timeout"
    cause = exc.cause
    while isinstance(cause, ActivityError):
        cause = cause.cause
    kind = cause.type if isinstance(cause, ApplicationError) else None
    return _KINDS.get(kind or "", "activity")


def _timed_out(exc: ActivityError) -> bool:
    cause: BaseException | None = exc.cause
    while isinstance(cause, ActivityError):
        cause = cause.cause
    return isinstance(cause, TimeoutError)
