"""Calling the built-in tools in tests: through the SDK's own activity runner, or through a real
worker process on the dev server (its own environment: a canary secret in it is really the
worker's, /proc/<pid>/environ included).

    result = await call(workdir, "read", path="a.txt")
    result = await call(workdir, "bash", policy, command="ls")

    python -m tests.tool_calls ADDRESS QUEUE    # a worker of OneToolCall and run_tool
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import workflow
from temporalio.testing import ActivityEnvironment

with workflow.unsafe.imports_passed_through():
    from agentrun.activities.tools.run import run_tool
    from agentrun.models.tools import RUN_TOOL, ToolCall, ToolCallInput, ToolPolicy, ToolResult

ROOT = Path(__file__).resolve().parent.parent


def make_input(workdir: Path | str, name: str, policy: ToolPolicy | None = None, **arguments: Any) -> ToolCallInput:
    return ToolCallInput(
        call=ToolCall(id=f"call-{name}", name=name, arguments=arguments),
        workdir=str(workdir),
        policy=policy or ToolPolicy(),
        run_id="tools-test",
        step="step",
    )


async def call(workdir: Path | str, name: str, policy: ToolPolicy | None = None, **arguments: Any) -> ToolResult:
    """One call through the activity itself, in the SDK's activity runner."""
    return await ActivityEnvironment().run(run_tool, make_input(workdir, name, policy, **arguments))


@workflow.defn
class OneToolCall:
    """The smallest workflow that makes a tool call an activity, as the tool loop does."""

    @workflow.run
    async def run(self, input: ToolCallInput) -> ToolResult:
        return await workflow.execute_activity(
            RUN_TOOL,
            input,
            result_type=ToolResult,
            start_to_close_timeout=timedelta(seconds=120),
            heartbeat_timeout=timedelta(seconds=30),
        )


def start_tool_worker(address: str, queue: str, env: dict[str, str]) -> subprocess.Popen:
    """A worker process of its own, with exactly `env` as its environment."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.tool_calls", address, queue],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None and b"worker polling" in proc.stdout.readline(), "the tool worker did not start"
    return proc


async def _serve(address: str, queue: str) -> None:
    from temporalio.client import Client
    from temporalio.worker import UnsandboxedWorkflowRunner, Worker

    from agentrun.worker.blobs import data_converter

    client = await Client.connect(address, data_converter=data_converter())
    async with Worker(
        client,
        task_queue=queue,
        workflows=[OneToolCall],
        activities=[run_tool],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):
        print("worker polling", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(_serve(sys.argv[1], sys.argv[2]))
