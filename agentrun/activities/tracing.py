"""Each activity attempt as a span on the worker that ran it, and agent-call latency.

temporalio's OpenTelemetry interceptor, before this one, has made the workflow span that scheduled
the activity current (from the activity's headers), so an attempt's span is that span's child: a
transport error retried shows as a failed attempt beside the one that answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput

from agentrun.activities.redact import redact
from agentrun.models import calls
from agentrun.models import telemetry as names
from agentrun.models.drivers import driver_of, model_of

_TRACER = trace.get_tracer("agentrun.activity")
_METER = metrics.get_meter("agentrun.activity")
# The GenAI conventions' histogram, with the buckets they advise (seconds).
_DURATION = _METER.create_histogram(
    names.OPERATION_DURATION,
    unit="s",
    description="GenAI operation duration",
    explicit_bucket_boundaries_advisory=[
        0.01,
        0.02,
        0.04,
        0.08,
        0.16,
        0.32,
        0.64,
        1.28,
        2.56,
        5.12,
        10.24,
        20.48,
        40.96,
        81.92,
    ],
)
MAX_DESCRIPTION = 500


class ActivityTelemetry(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, traced: bool):
        super().__init__(next)
        self.traced = traced

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        arg = input.args[0] if input.args else None
        agent = arg if info.activity_type == calls.RUN_AGENT and isinstance(arg, calls.AgentCall) else None
        started, error = time.monotonic(), None
        with self._span(info, arg) as span:
            try:
                result = await self.next.execute_activity(input)
            except BaseException as exc:
                error = _error_type(exc)
                if span is not None:
                    _failed(span, exc, error)
                raise
            finally:
                if agent is not None:
                    _DURATION.record(time.monotonic() - started, _call_attributes(agent, error))
            if span is not None:
                span.set_attribute(names.OUTCOME, "completed")
            return result

    def _span(self, info: activity.Info, arg: Any) -> contextlib.AbstractContextManager[Span | None]:
        if not self.traced:
            return contextlib.nullcontext(None)
        attributes: dict[str, Any] = {
            names.RUN_ID: info.workflow_id or "",
            names.ATTEMPT: info.attempt,
            "agentrun.activity": info.activity_type,
        }
        task = getattr(arg, "task_id", None)
        if isinstance(task, str):
            attributes[names.NODE_KEY] = task
        if isinstance(arg, calls.AgentCall):
            attributes[names.AGENT] = arg.agent_id
        return _TRACER.start_as_current_span(
            info.activity_type,
            kind=SpanKind.SERVER,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        )


def _call_attributes(call: calls.AgentCall, error: str | None) -> dict[str, str]:
    attributes = {names.OPERATION: names.operation(call.uri), names.PROVIDER: names.provider(call.uri)}
    if driver_of(call.uri).chat:
        attributes[names.REQUEST_MODEL] = model_of(call.uri)
    if error is not None:
        attributes[names.ERROR_TYPE] = error
    return attributes


def _error_type(exc: BaseException) -> str:
    """The failure's kind, as `error.type` wants it: an ApplicationError's type (AgentUnavailable
    for a transport error the retry policy retries, AgentError, ResultTooLarge), else the class."""
    if isinstance(exc, ApplicationError) and exc.type:
        return exc.type
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    return type(exc).__name__


def _failed(span: Span, exc: BaseException, error: str) -> None:
    span.set_attribute(names.ERROR_TYPE, error)
    if isinstance(exc, asyncio.CancelledError):
        span.set_attribute(names.OUTCOME, "cancelled")
        return
    span.set_attribute(names.OUTCOME, "failed")
    message = exc.message if isinstance(exc, ApplicationError) else str(exc)
    span.set_status(Status(StatusCode.ERROR, redact(message)[:MAX_DESCRIPTION]))
