"""Runs of any size against raw Temporal, on one dev server in the same run.

    python bench/scale.py [--maps 100,1000,10000] [--loops 1000,10000] [--concurrent 100] [--tasks 10]

Long maps: a pipeline mapping an instant `scripted:` agent over a list of `--maps` items, at most
200 at a time, which runs its elements in batches of 100, each a child workflow; raw: RawMap, the
same batches as RawBatch child workflows (two open at a time, 100 run_agent activities in flight in
each, the same calls). Printed: wall time, ms per item, the workflows, and the largest single
history among the run and its batches (events, bytes), for each.

Long loops: a task whose agent (instant `scripted:`) answers CONTINUE for `--loops` rounds, which
continues as new as its history grows; raw: RawLoop, one run_agent activity per round with the
same call, continuing as new at the same history length. Printed: wall time, ms per round, the
executions, and the largest single execution's history (events, bytes), for each.

Many runs: `--concurrent` runs of a `--tasks`-task chain (an instant `scripted:` agent) started at
once on one `python -m worker` process, then the same number of RawChain runs (bench/overhead.py:
one run_agent activity per task, nothing else) on a worker process that registers only RawChain
and the activities. Printed: runs/s for each, the ratio, and each worker's peak RSS (VmHWM).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker

# The sandbox re-imports this file to check RawLoop; our modules come from outside it, once.
with workflow.unsafe.imports_passed_through():
    from overhead import HEARTBEAT_S, REPLY, RawChain, dev_server, raw_input, worker_process, write_chain
    from pydantic import BaseModel

    from agentrun.lang import ir
    from agentrun.lang import params as spec_params
    from agentrun.lang.load import load
    from agentrun.models.calls import RUN_AGENT, AgentCall, AgentReply
    from agentrun.models.contract import HISTORY_LIMIT, RunInput, RunState
    from agentrun.worker.blobs import data_converter
    from agentrun.worker.build import ACTIVITIES, runner

with workflow.unsafe.sandbox_unrestricted():  # the sandbox re-imports this file to check RawLoop
    ROOT = Path(__file__).resolve().parent.parent
ENGINE_QUEUE, RAW_QUEUE = "agentrun-scale", "agentrun-scale-raw"


CONTINUE = "more\nCOMPLETION_STATUS: CONTINUE"
MAP_BATCH, MAP_CONCURRENCY = ir.MAP_BATCH, 200  # the engine's default batch; the highest concurrency


class MapInput(BaseModel):
    call: AgentCall  # every element's call, but for its task id and prompt
    items: list[int]
    batch: int
    concurrency: int
    first: int = 0  # a batch's first element


def element_call(inp: MapInput, index: int) -> AgentCall:
    item = inp.items[index - inp.first]
    return inp.call.model_copy(update={"task_id": f"each[{index}]", "prompt": f"Score {item}."})


async def run_elements(inp: MapInput) -> list[str]:
    """One run_agent activity per element, `concurrency` in flight; the replies in order."""
    results: list[str] = [""] * len(inp.items)
    slots = asyncio.Semaphore(inp.concurrency)

    async def element(position: int) -> None:
        async with slots:
            reply = await workflow.execute_activity(
                RUN_AGENT,
                element_call(inp, inp.first + position),
                result_type=AgentReply,
                start_to_close_timeout=timedelta(seconds=inp.call.timeout_s),
                heartbeat_timeout=timedelta(seconds=HEARTBEAT_S),
            )
            results[position] = reply.text

    await asyncio.gather(*(element(p) for p in range(len(inp.items))))
    return results


@workflow.defn(name="RawBatch")
class RawBatch:
    """The baseline's batch of elements, a child workflow of RawMap."""

    @workflow.run
    async def run(self, inp: MapInput) -> list[str]:
        return await run_elements(inp)


@workflow.defn(name="RawMap")
class RawMap:
    """The baseline map: a list longer than a batch runs in batches, each a RawBatch child, as many
    open as concurrency allows."""

    @workflow.run
    async def run(self, inp: MapInput) -> int:
        size = inp.batch
        if len(inp.items) <= size:  # as the engine does, a list no longer than a batch runs in place
            return len(await run_elements(inp))
        slots = asyncio.Semaphore(max(1, inp.concurrency // size))
        per_batch = min(inp.concurrency, size)
        results: list[str] = []

        async def batch(n: int) -> list[str]:
            part = inp.items[n * size : (n + 1) * size]
            child = MapInput(call=inp.call, items=part, batch=size, concurrency=per_batch, first=n * size)
            async with slots:
                return await workflow.execute_child_workflow(
                    RawBatch.run, child, id=f"{workflow.info().workflow_id}/batch-{n}"
                )

        for done in await asyncio.gather(*(batch(n) for n in range(-(-len(inp.items) // size)))):
            results += done
        return len(results)


class LoopInput(BaseModel):
    call: AgentCall
    rounds: int
    history_limit: int


@workflow.defn(name="RawLoop")
class RawLoop:
    """The baseline loop: one run_agent activity per round, continuing as new at the same length."""

    @workflow.run
    async def run(self, inp: LoopInput) -> int:
        for done in range(inp.rounds):
            if workflow.info().get_current_history_length() >= inp.history_limit:
                workflow.continue_as_new(inp.model_copy(update={"rounds": inp.rounds - done}))
            await workflow.execute_activity(
                RUN_AGENT,
                inp.call,
                result_type=AgentReply,
                start_to_close_timeout=timedelta(seconds=inp.call.timeout_s),
                heartbeat_timeout=timedelta(seconds=HEARTBEAT_S),
            )
        return inp.rounds


@dataclass
class Chain:
    """A run's executions: how many, and the largest one's history."""

    wall_s: float
    executions: int
    most_events: int
    most_bytes: int


async def chain(client: Client, workflow_id: str, wall_s: float, query: str) -> Chain:
    """The executions `query` names for `workflow_id`: a run's (WorkflowId), or a run's and its
    children's (RootWorkflowId)."""
    events, sizes = [], []
    async for execution in client.list_workflows(f'{query} = "{workflow_id}"'):
        described = await client.get_workflow_handle(execution.id, run_id=execution.run_id).describe()
        info = described.raw_description.workflow_execution_info
        events.append(info.history_length)
        sizes.append(info.history_size_bytes)
    return Chain(wall_s, len(events), max(events), max(sizes))


def state_kb(state: RunState) -> float:
    """The run's final state as its memo and the `state` query hold it, in KB of JSON."""
    return len(state.model_dump_json().encode()) / 1024


def loop_spec(folder: Path, rounds: int) -> Path:
    spec = folder / f"loop{rounds}.yaml"
    spec.write_text(
        f"name: loop{rounds}\nsubtasks:\n  grind:\n    instructions: Grind.\n"
        f"    loop_until: {{status: DONE, max_iterations: {rounds}}}\n"
    )
    (folder / "loop-replies.yaml").write_text(f"default: {json.dumps(CONTINUE)}\n")
    return spec


@contextlib.contextmanager
def both_workers(address: str) -> Iterator[None]:
    """The engine's worker process and the raw side's, for as long as the block runs."""
    engine = worker_process(address, "-m", "agentrun.worker", "--task-queue", ENGINE_QUEUE)
    raw = worker_process(address, str(Path(__file__)), "--serve-raw")
    try:
        yield
    finally:
        stop(engine)
        stop(raw)


async def timed(
    client: Client, run: Any, arg: Any, prefix: str, queue: str, query: str, **kw: Any
) -> tuple[Any, Chain]:
    """Run a workflow to its end: its result, and its executions (those `query` names) with the wall time."""
    run_id = f"{prefix}-{uuid.uuid4().hex[:8]}"
    began = time.perf_counter()
    result = await client.execute_workflow(run, arg, id=run_id, task_queue=queue, **kw)
    return result, await chain(client, run_id, time.perf_counter() - began, query)


def compare(heading: str, count: int, unit: str, runs: str, engine: Chain, raw: Chain, state: RunState) -> None:
    print(heading)
    for name, c in (("engine", engine), ("raw", raw)):
        print(
            f"  {name + ':':7} {c.wall_s:.1f} s, {c.wall_s / count * 1000:.2f} ms/{unit}, "
            f"{c.executions} {runs}, largest history {c.most_events} events / {c.most_bytes / 1024:.0f} KB"
        )
    print(f"  ratio {engine.wall_s / raw.wall_s:.2f}; the engine's final state {state_kb(state):.0f} KB")


async def loops(client: Client, address: str, counts: list[int]) -> None:
    with tempfile.TemporaryDirectory(prefix="agentrun-scale-") as tmp, both_workers(address):
        uri = "scripted:loop-replies.yaml"
        for rounds in counts:
            plan = load(str(loop_spec(Path(tmp), rounds)))
            inp = RunInput(plan=plan, params={}, workdir=tmp, default_agent=uri, heartbeat_s=HEARTBEAT_S)
            state, engine = await timed(
                client, "AgentRun", inp, "scale-loop", ENGINE_QUEUE, "WorkflowId", result_type=RunState
            )
            if state.status != "completed" or state.tasks["grind"].iterations != rounds:
                raise RuntimeError(f"the engine's loop did not run {rounds} rounds: {state.status}")
            call = raw_input(plan, state.run_id, tmp, uri).calls[0]
            looped = LoopInput(call=call, rounds=rounds, history_limit=HISTORY_LIMIT)
            _, raw = await timed(client, RawLoop.run, looped, "scale-raw-loop", RAW_QUEUE, "WorkflowId")
            compare(f"a loop of {rounds} rounds:", rounds, "round", "executions", engine, raw, state)


def map_spec(folder: Path) -> Path:
    spec = folder / "map.yaml"
    spec.write_text(
        "workflow:\n  name: bigmap\n  inputs:\n    - {name: items, type: json, required: true}\n"
        '  agents:\n    scorer: {prompt: "Score {{item}}."}\n  steps:\n    - id: each\n      type: map\n'
        f'      map: {{over: "{{{{inputs.items}}}}", agent: scorer, concurrency: {MAP_CONCURRENCY}, batch: {MAP_BATCH}}}\n'
    )
    (folder / "map-replies.yaml").write_text(f"default: {json.dumps(REPLY)}\n")
    return spec


async def maps(client: Client, address: str, counts: list[int]) -> None:
    with tempfile.TemporaryDirectory(prefix="agentrun-scale-") as tmp, both_workers(address):
        uri = "scripted:map-replies.yaml"
        plan = load(str(map_spec(Path(tmp))), given_params=["items"])
        for count in counts:
            items = list(range(count))
            params = spec_params.bind(plan, {"items": items})
            inp = RunInput(plan=plan, params=params, workdir=tmp, default_agent=uri, heartbeat_s=HEARTBEAT_S)
            state, engine = await timed(
                client, "AgentRun", inp, "scale-map", ENGINE_QUEUE, "RootWorkflowId", result_type=RunState
            )
            if state.status != "completed" or len(state.steps["each"]["output"]) != count:
                raise RuntimeError(f"the engine's map did not give {count} results: {state.status}")
            template = AgentCall(
                run_id=state.run_id,
                task_id="each",
                agent_id="scorer",
                uri=uri,
                prompt="",
                workdir=tmp,
                lifecycle=plan.lifecycle,
                timeout_s=1800,
            )
            mapped = MapInput(call=template, items=items, batch=MAP_BATCH, concurrency=MAP_CONCURRENCY)
            done, raw = await timed(client, RawMap.run, mapped, "scale-raw-map", RAW_QUEUE, "RootWorkflowId")
            if done != count:
                raise RuntimeError(f"the raw map gave {done} results of {count}")
            heading = f"a map of {count} items, {MAP_CONCURRENCY} at a time in batches of {MAP_BATCH}:"
            compare(heading, count, "item", "workflows", engine, raw, state)


@dataclass
class Batch:
    runs: int
    wall_s: float
    peak_rss_mb: float

    @property
    def per_s(self) -> float:
        return self.runs / self.wall_s


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident set (VmHWM, Linux /proc) in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc status")


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    proc.wait(timeout=60)


async def engine_runs(client: Client, plan: ir.Plan, workdir: str, uri: str, count: int) -> float:
    inp = RunInput(plan=plan, params={}, workdir=workdir, default_agent=uri, heartbeat_s=HEARTBEAT_S)
    began = time.perf_counter()
    handles = [
        await client.start_workflow(
            "AgentRun", inp, id=f"scale-{uuid.uuid4().hex[:8]}", task_queue=ENGINE_QUEUE, result_type=RunState
        )
        for _ in range(count)
    ]
    states = await asyncio.gather(*(h.result() for h in handles))
    wall = time.perf_counter() - began
    failed = [s.run_id for s in states if s.status != "completed"]
    if failed:
        raise RuntimeError(f"engine runs did not complete: {failed[:5]}")
    return wall


async def raw_runs(client: Client, plan: ir.Plan, workdir: str, uri: str, count: int) -> float:
    began = time.perf_counter()
    handles = []
    for _ in range(count):
        run_id = f"scale-raw-{uuid.uuid4().hex[:8]}"
        handles.append(
            await client.start_workflow(
                RawChain.run, raw_input(plan, run_id, workdir, uri), id=run_id, task_queue=RAW_QUEUE
            )
        )
    replies = await asyncio.gather(*(h.result() for h in handles))
    wall = time.perf_counter() - began
    if any(reply != REPLY for reply in replies):
        raise RuntimeError("raw runs returned something else")
    return wall


async def concurrent(client: Client, address: str, count: int, tasks: int) -> None:
    with tempfile.TemporaryDirectory(prefix="agentrun-scale-") as tmp:
        uri = "scripted:replies.yaml"
        plan = load(str(write_chain(Path(tmp), tasks)))
        engine = worker_process(address, "-m", "agentrun.worker", "--task-queue", ENGINE_QUEUE)
        try:
            await engine_runs(client, plan, tmp, uri, 2)  # warm-up, not counted
            engine_batch = Batch(count, await engine_runs(client, plan, tmp, uri, count), peak_rss_mb(engine.pid))
        finally:
            stop(engine)
        raw = worker_process(address, str(Path(__file__)), "--serve-raw")
        try:
            await raw_runs(client, plan, tmp, uri, 2)
            raw_batch = Batch(count, await raw_runs(client, plan, tmp, uri, count), peak_rss_mb(raw.pid))
        finally:
            stop(raw)
    print(f"{count} concurrent runs of {tasks} tasks on one worker process, {os.cpu_count()} cores:")
    print(
        f"  engine: {engine_batch.per_s:.1f} runs/s ({engine_batch.wall_s:.1f} s), peak RSS {engine_batch.peak_rss_mb:.0f} MB"
    )
    print(f"  raw:    {raw_batch.per_s:.1f} runs/s ({raw_batch.wall_s:.1f} s), peak RSS {raw_batch.peak_rss_mb:.0f} MB")
    print(
        f"  ratio {engine_batch.wall_s / raw_batch.wall_s:.2f} wall, "
        f"{engine_batch.peak_rss_mb / raw_batch.peak_rss_mb:.2f} peak RSS"
    )


async def serve_raw() -> None:
    """The raw side's worker: RawChain and the activities, no engine workflow."""
    client = await Client.connect(os.environ["TEMPORAL_ADDRESS"], data_converter=data_converter())
    worker = Worker(
        client,
        task_queue=RAW_QUEUE,
        workflows=[RawChain, RawLoop, RawMap, RawBatch],
        activities=ACTIVITIES,
        workflow_runner=runner(),
        max_concurrent_activities=100,
        graceful_shutdown_timeout=timedelta(seconds=10),
    )
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stopped.set)
    async with worker:
        print("worker polling", flush=True)
        await stopped.wait()


async def main(args: argparse.Namespace) -> None:
    env = await dev_server()
    async with env:
        address = env.client.service_client.config.target_host
        if args.maps:
            await maps(env.client, address, [int(n) for n in args.maps.split(",")])
        if args.loops:
            await loops(env.client, address, [int(n) for n in args.loops.split(",")])
        if args.concurrent:
            await concurrent(env.client, address, args.concurrent, args.tasks)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Runs of any size against raw Temporal.")
    parser.add_argument("--maps", default="100,1000,10000", help="items of each map run, comma-separated ('' for none)")
    parser.add_argument("--loops", default="1000,10000", help="rounds of each loop run, comma-separated ('' for none)")
    parser.add_argument("--concurrent", type=int, default=100, help="concurrent runs (0 for none)")
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--serve-raw", action="store_true", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    asyncio.run(serve_raw() if arguments.serve_raw else main(arguments))
    # The SDK's native threads can still be calling into Python while the interpreter finalizes,
    # which aborts the process now and then (as the worker's entry point says); all is printed.
    sys.stdout.flush()
    os._exit(0)
