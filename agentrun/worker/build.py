"""Building a Worker with the engine's workflows, activities and workflow runner."""

from __future__ import annotations

import functools
import hashlib
import os
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker, WorkflowRunner

from agentrun.activities.agent import release_agent, run_agent
from agentrun.activities.criteria import check_criteria
from agentrun.activities.mcp.calls import call_mcp_tool, list_mcp_tools
from agentrun.activities.preconditions import check_preconditions
from agentrun.activities.provider import call_provider
from agentrun.activities.tools import wall
from agentrun.activities.tools.preview import preview_tool
from agentrun.activities.tools.run import run_tool
from agentrun.activities.validation import validate_output
from agentrun.models.contract import TASK_QUEUE
from agentrun.worker import GRACEFUL_SHUTDOWN_S, paths
from agentrun.worker.failures import with_plain_failures
from agentrun.worker.versioning import Versioning
from agentrun.workflows.agent_run import AgentRun
from agentrun.workflows.batch_run import AgentRunBatch

ACTIVITIES = [run_agent, release_agent, check_criteria, call_provider, check_preconditions, validate_output, run_tool]
WORKFLOWS = [AgentRun, AgentRunBatch]
ACTIVITIES += [list_mcp_tools, call_mcp_tool]  # MCP servers as tool sources
ACTIVITIES += [preview_tool]  # a write or edit shown as a diff to the person who approves it
# Heartbeats reach the server at most this often (the SDK's default waits up to 80% of the heartbeat
# timeout): a running agent call's reply so far (activities.progress) is then at most this old.
HEARTBEAT_THROTTLE = timedelta(seconds=1)
# A run's next workflow task goes first to the worker that holds the run in memory (its sticky
# queue); when that worker died, the task waits this long before any worker takes it over.
STICKY_ENV, STICKY_S = "AGENTRUN_STICKY_S", "10"

# The libraries workflow code uses: deterministic, loaded once for every run.
LIBRARIES = (
    "pydantic",
    "pydantic_core",
    "jinja2",
    "markupsafe",
    "yaml",
    "opentelemetry",
)


def runner(strict: bool = False) -> WorkflowRunner:
    """How the worker runs workflow code: outside Temporal's sandbox. Sandboxed, our modules would be
    imported again for every run (about 0.8 s of CPU, their pydantic models built anew); passed
    through the sandbox, its restrictions never reach them and it still costs about 1 ms of CPU a
    workflow task (an `exec` per activation and per payload; bench/sandbox.py). So determinism is
    checked by tests instead: tests/test_determinism.py reads the workflow code, and the replay test
    replays each history it records with `strict`: our code imported and restricted in the sandbox."""
    if not strict:
        return UnsandboxedWorkflowRunner()
    from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

    return SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default.with_passthrough_modules(*LIBRARIES))


@functools.cache
def build_id() -> str:
    """The engine's code, as the worker names it to Temporal: a hash of agentrun's own source files.
    Without one the SDK hashes the code of every loaded module, 0.2-0.3 s at each worker start, which
    `start` waits for before its run's first step."""
    digest = hashlib.sha256()
    root = Path(__file__).resolve().parent.parent
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return f"agentrun-{digest.hexdigest()[:16]}"


def build_worker(
    client: Client,
    task_queue: str = TASK_QUEUE,
    max_concurrent_activities: int = 100,
    identity: str | None = None,
    max_cached_workflows: int = 1000,
    versioning: Versioning | None = None,
) -> Worker:
    """`versioning`: the worker registers its build with Worker Deployment Versioning and the runs
    it starts stay on that build (agentrun.worker.versioning); else it takes any run of the queue."""
    # Not dumpable, whatever the sandbox can do: no program it starts reads its /proc/<pid>/environ.
    wall.hide_worker()
    return Worker(
        with_plain_failures(client),
        task_queue=task_queue,
        workflows=WORKFLOWS,
        activities=ACTIVITIES,
        workflow_runner=runner(),
        max_concurrent_activities=max_concurrent_activities,
        max_cached_workflows=max_cached_workflows,
        graceful_shutdown_timeout=timedelta(seconds=GRACEFUL_SHUTDOWN_S),
        max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
        default_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
        interceptors=paths.interceptors(),
        identity=identity,
        build_id=None if versioning else build_id(),
        deployment_config=versioning.config() if versioning else None,
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=float(os.environ.get(STICKY_ENV, STICKY_S))),
    )
