"""What Temporal's workflow sandbox costs: the engine's chain and raw Temporal's on three workflow
runners, in one run on one dev server.

    python bench/sandbox.py [--tasks 200] [--repeat 3] [--short 5]

- unsandboxed: as the worker runs workflows (agentrun.worker.build.runner());
- passed through: the sandbox, with our modules passed through it as the worker ran them until
  2026-11-27: its restrictions never reach our code, and each activation and payload still runs an
  `exec` inside it;
- sandboxed: our modules imported and restricted in the sandbox for every run (runner(strict=True),
  as the replay test runs them); `--short` (runs of a few tasks) shows that per-run cost."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import tempfile
from datetime import timedelta
from pathlib import Path

from overhead import BENCH_QUEUE, RawChain, Sample, dev_server, per_task, run_engine, run_raw, write_chain
from temporalio.client import Client
from temporalio.worker import Worker, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from agentrun.lang.load import load
from agentrun.worker.build import ACTIVITIES, LIBRARIES, WORKFLOWS, runner

OWN = ("agentrun.lang", "agentrun.workflows", "agentrun.models.contract", "agentrun.errors")
RUNNERS: dict[str, WorkflowRunner] = {
    "unsandboxed (shipped)": runner(),
    "passed through the sandbox": SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules(*LIBRARIES, *OWN)
    ),
    "sandboxed": runner(strict=True),
}


def worker(client: Client, queue: str, workflow_runner: WorkflowRunner) -> Worker:
    return Worker(
        client,
        task_queue=queue,
        workflows=[*WORKFLOWS, RawChain],
        activities=ACTIVITIES,
        workflow_runner=workflow_runner,
        max_concurrent_activities=100,
        graceful_shutdown_timeout=timedelta(seconds=10),
    )


def cpu(samples: list[Sample]) -> float:
    return statistics.median(s.cpu_s for s in samples)


async def bench(tasks: int, repeat: int, short: int) -> None:
    """One worker per runner, each on a queue of its own; the runs alternate between the runners, so
    a slow minute of the machine falls on all of them alike."""
    uri = "scripted:replies.yaml"
    queues = {name: f"{BENCH_QUEUE}-{number}" for number, name in enumerate(RUNNERS)}
    samples = {(name, kind): [] for name in RUNNERS for kind in ("raw", "long", "short")}
    env = await dev_server()
    async with env, contextlib.AsyncExitStack() as workers:
        for name, each in RUNNERS.items():
            await workers.enter_async_context(worker(env.client, queues[name], each))
        with tempfile.TemporaryDirectory(prefix="agentrun-bench-") as tmp:
            folder = Path(tmp)
            plans = {"long": load(str(write_chain(folder, tasks))), "short": load(str(write_chain(folder, short)))}
            for round in range(repeat + 1):  # the first round warms each worker up, not counted
                for name in RUNNERS:
                    got = {
                        "raw": await run_raw(env.client, plans["long"], tmp, uri, queues[name]),
                        "long": await run_engine(env.client, plans["long"], tmp, uri, queues[name]),
                        "short": await run_engine(env.client, plans["short"], tmp, uri, queues[name]),
                    }
                    for kind, sample in got.items():
                        samples[name, kind] += [sample] if round else []
    print(f"{tasks}-task chain, {repeat} runs each, alternating (medians); runs of {short} tasks for the cost per run")
    for name in RUNNERS:
        print(f"{name}:")
        print(f"  raw:    {per_task(samples[name, 'raw'], tasks)}")
        print(f"  engine: {per_task(samples[name, 'long'], tasks)}")
        print(
            f"  engine / raw cpu {cpu(samples[name, 'long']) / cpu(samples[name, 'raw']):.2f}; "
            f"a {short}-task run of the engine {cpu(samples[name, 'short']) * 1000:.0f} ms cpu"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200, help="tasks in the long chain (default 200)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each (default 3)")
    parser.add_argument("--short", type=int, default=5, help="tasks in the short chain (default 5)")
    args = parser.parse_args()
    asyncio.run(bench(args.tasks, args.repeat, args.short))


if __name__ == "__main__":
    main()
