"""Building a Worker with the engine's workflows, activities and sandbox settings."""

from __future__ import annotations

from datetime import timedelta

from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from agentrun.activities.agent import release_agent, run_agent
from agentrun.activities.criteria import check_criteria
from agentrun.activities.preconditions import check_preconditions
from agentrun.activities.provider import call_provider
from agentrun.activities.validation import validate_output
from agentrun.contract import TASK_QUEUE
from agentrun.worker import paths
from agentrun.worker.failures import with_plain_failures
from agentrun.workflows.agent_run import AgentRun
from agentrun.workflows.batch_run import AgentRunBatch

ACTIVITIES = [run_agent, release_agent, check_criteria, call_provider, check_preconditions, validate_output]
WORKFLOWS = [AgentRun, AgentRunBatch]
GRACEFUL_SHUTDOWN_S = 10.0  # how long running activities get to end when a worker stops

# Our pure modules and their libraries are loaded once, not re-imported per workflow run.
_PASSTHROUGH = (
    "agentrun.lang",
    "agentrun.workflows",
    "pydantic",
    "pydantic_core",
    "jinja2",
    "markupsafe",
    "yaml",
    "opentelemetry",
)


def runner() -> SandboxedWorkflowRunner:
    return SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default.with_passthrough_modules(*_PASSTHROUGH))


def build_worker(
    client: Client,
    task_queue: str = TASK_QUEUE,
    max_concurrent_activities: int = 100,
    identity: str | None = None,
    max_cached_workflows: int = 1000,
) -> Worker:
    return Worker(
        with_plain_failures(client),
        task_queue=task_queue,
        workflows=WORKFLOWS,
        activities=ACTIVITIES,
        workflow_runner=runner(),
        max_concurrent_activities=max_concurrent_activities,
        max_cached_workflows=max_cached_workflows,
        graceful_shutdown_timeout=timedelta(seconds=GRACEFUL_SHUTDOWN_S),
        interceptors=paths.interceptors(),
        identity=identity,
    )
