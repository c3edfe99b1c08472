"""The run's own telemetry, as a workflow interceptor: its start and end as events and, when traced,
its span. Apart from `tracing` so the views that render prompts (inspect, dry-run) load that module
without Temporal's worker."""

from __future__ import annotations

import contextlib
from typing import Any

from opentelemetry.trace import Span
from temporalio import workflow
from temporalio.worker import ExecuteWorkflowInput, WorkflowInboundInterceptor

from agentrun.lang import ir
from agentrun.models import telemetry as names
from agentrun.workflows.tracing import _ended, _event, _span


class RunTelemetry(WorkflowInboundInterceptor):
    """A run's start and end as events, and runs counted by final status."""

    traced = False

    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        plan = getattr(input.args[0], "plan", None) if input.args else None
        spec = plan.name if isinstance(plan, ir.Plan) else workflow.info().workflow_type
        with self._span(spec, plan) as span:
            _event("run.started", spec=spec)
            try:
                return await super().execute_workflow(input)
            finally:
                _ended(span)

    def _span(self, spec: str, plan: ir.Plan | None) -> contextlib.AbstractContextManager[Span | None]:
        if not self.traced:
            return contextlib.nullcontext(None)
        attributes = {
            names.OPERATION: names.INVOKE_WORKFLOW,
            names.WORKFLOW_NAME: spec,
            names.RUN_ID: workflow.info().workflow_id,
            names.SPEC: spec,
            **({names.DIALECT: plan.dialect} if plan is not None else {}),
        }
        return _span(f"{names.INVOKE_WORKFLOW} {spec}", attributes)


class TracedRun(RunTelemetry):
    """…and the run's span, under the span of the client that started it (temporalio's
    OpenTelemetry interceptor, before this one, has made that current from the workflow's headers)."""

    traced = True
