"""The client's part of a run's trace: the span of starting it. temporalio's OpenTelemetry
interceptor puts the span's context in the workflow's headers, so the run's own span, and all
under it, join this trace."""

from __future__ import annotations

from contextlib import AbstractContextManager

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind

from agentrun.lang import ir
from agentrun.models import telemetry as names

_TRACER = trace.get_tracer("agentrun.client")


def starting(plan: ir.Plan, run_id: str) -> AbstractContextManager[Span]:
    """The span around starting run `run_id` of `plan`; a no-op unless this process traces."""
    attributes = {
        names.RUN_ID: run_id,
        names.SPEC: plan.name,
        names.DIALECT: plan.dialect,
        "agentrun.tasks": len(plan.leaves()),
    }
    return _TRACER.start_as_current_span(
        f"start {plan.name}", kind=SpanKind.CLIENT, attributes=attributes, record_exception=False
    )
