"""What sandboxing our own workflow code would cost: the engine's chain with our modules passed through
the workflow sandbox (as the worker runs them) and re-imported in it for every run (runner(strict=True)),
beside raw Temporal, in one run on one dev server.

    python bench/sandbox.py [--tasks 200] [--repeat 3] [--short 5]

Per task the two differ little; per run the sandboxed one pays for importing our modules again, which
`--short` (runs of a few tasks) shows."""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
from datetime import timedelta
from pathlib import Path

from overhead import BENCH_QUEUE, RawChain, Sample, dev_server, per_task, run_engine, run_raw, write_chain
from temporalio.worker import Worker

from agentrun.lang import ir
from agentrun.lang.load import load
from agentrun.worker.build import ACTIVITIES, WORKFLOWS, runner


def worker(client, strict: bool) -> Worker:
    return Worker(
        client,
        task_queue=BENCH_QUEUE,
        workflows=[*WORKFLOWS, RawChain],
        activities=ACTIVITIES,
        workflow_runner=runner(strict=strict),
        max_concurrent_activities=100,
        graceful_shutdown_timeout=timedelta(seconds=10),
    )


async def side(client, strict: bool, plans: dict[str, ir.Plan], tmp: str, repeat: int) -> dict[str, list[Sample]]:
    """Each plan `repeat` times through the engine on a worker with this sandbox, after one warm-up."""
    samples: dict[str, list[Sample]] = {name: [] for name in plans}
    async with worker(client, strict):
        await run_engine(client, plans["short"], tmp, "scripted:replies.yaml")
        for _ in range(repeat):
            for name, plan in plans.items():
                samples[name].append(await run_engine(client, plan, tmp, "scripted:replies.yaml"))
    return samples


async def bench(tasks: int, repeat: int, short: int) -> None:
    env = await dev_server()
    async with env:
        with tempfile.TemporaryDirectory(prefix="agentrun-bench-") as tmp:
            folder = Path(tmp)
            plans = {"long": load(str(write_chain(folder, tasks))), "short": load(str(write_chain(folder, short)))}
            raw: list[Sample] = []
            async with worker(env.client, strict=False):
                await run_raw(env.client, plans["long"], tmp, "scripted:replies.yaml")  # warm-up
                for _ in range(repeat):
                    raw.append(await run_raw(env.client, plans["long"], tmp, "scripted:replies.yaml"))
            passed = await side(env.client, False, plans, tmp, repeat)
            strict = await side(env.client, True, plans, tmp, repeat)
    print(f"{tasks}-task chain, {repeat} runs each (medians); runs of {short} tasks for the cost per run")
    print(f"raw Temporal:              {per_task(raw, tasks)}")
    for name, got in (("own code passed through", passed), ("own code sandboxed     ", strict)):
        cpu_ratio = statistics.median(s.cpu_s for s in got["long"]) / statistics.median(s.cpu_s for s in raw)
        run_cpu = statistics.median(s.cpu_s for s in got["short"]) * 1000
        print(
            f"{name}:   {per_task(got['long'], tasks)}; cpu {cpu_ratio:.2f}x raw; a {short}-task run {run_cpu:.0f} ms cpu"
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
