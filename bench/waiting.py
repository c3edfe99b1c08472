"""Many runs waiting at a gate on one worker whose workflow cache is smaller than their number.

    python bench/waiting.py [--runs 1000] [--cache N] [--old] [--list-only]

`--runs` runs of a one-step spec whose step waits for an approval start on one `python -m worker`
process with `--max-cached-workflows` `--cache` (default a quarter of the runs), and wait at their
gate. Printed: the time to start them and see them all waiting, the worker's peak RSS (VmHWM), the
time `pending --all` takes to list every open question (from the runs' memos in the visibility
store; with `--old` also the way it was before, a query to each run) and plain `pending` (the 200
latest and a count of the others), the time to approve them all (each
approval an update the worker takes, replaying runs its cache no longer holds), and how many
completed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable
from pathlib import Path
from typing import TypeVar

from overhead import HEARTBEAT_S, dev_server, worker_process
from scale import peak_rss_mb, stop
from temporalio.client import Client

from agentrun.client import humans, launch, no_worker
from agentrun.errors import UserError
from agentrun.lang.load import load
from agentrun.models.contract import RunInput, RunState

T = TypeVar("T")
QUEUE = "agentrun-waiting"
WAITING = f'TaskQueue="{QUEUE}" AND AgentRunWaitingFor="human_approval"'
AT_ONCE = 50  # starts and approvals in flight at a time
ANSWER_WAIT_S = 60.0
PAGE = 200  # what `pending` lists unless told --all
SPEC = """\
name: waiting
subtasks:
  ship:
    approval: {prompt: "Ship it?"}
    instructions: "ship"
"""


async def in_flight(calls: list, at_once: int = AT_ONCE) -> list:
    limit = asyncio.Semaphore(at_once)

    async def one(call):
        async with limit:
            return await call

    return await asyncio.gather(*(one(c) for c in calls))


async def start_all(client: Client, inp: RunInput, count: int) -> list[str]:
    ids = [f"waiting-{uuid.uuid4().hex[:10]}" for _ in range(count)]
    await in_flight([launch.start_run(client, inp, rid, QUEUE) for rid in ids])
    return ids


async def until_waiting(client: Client, count: int) -> None:
    while (await client.count_workflows(WAITING)).count < count:
        await asyncio.sleep(0.5)


async def timed(call: Awaitable[T]) -> tuple[float, T]:
    began = time.perf_counter()
    found = await call
    return time.perf_counter() - began, found


async def approve(client: Client, rid: str) -> str | None:
    """Approve the run's gate; None once taken, else why not (and what `status` would say of it)."""
    try:
        await humans.answer(client, rid, "approve", "ship", "", "bench", ANSWER_WAIT_S)
    except UserError as exc:
        return f"{exc}; {await no_worker.stuck(client, rid) or 'its workflow task is not stuck'}"
    return None


async def approve_all(client: Client, ids: list[str]) -> tuple[list[str], list[RunState]]:
    refused = [f"{rid}: {why}" for rid, why in zip(ids, await in_flight([approve(client, r) for r in ids])) if why]
    taken = {line.split(":", 1)[0] for line in refused}
    handles = [client.get_workflow_handle(rid, result_type=RunState) for rid in ids if rid not in taken]
    return refused, await in_flight([h.result() for h in handles], 500)


def say(text: str) -> None:
    print(text, flush=True)


async def bench(client: Client, address: str, count: int, cache: int, old: bool, list_only: bool) -> None:
    say(f"{count} runs waiting at a gate on one worker process (cache {cache} runs), {os.cpu_count()} cores:")
    with tempfile.TemporaryDirectory(prefix="agentrun-waiting-") as tmp:
        (Path(tmp) / "replies.yaml").write_text('default: "shipped\\nCOMPLETION_STATUS: COMPLETE"\n')
        (Path(tmp) / "waiting.yaml").write_text(SPEC)
        plan = load(str(Path(tmp) / "waiting.yaml"))
        inp = RunInput(
            plan=plan, params={}, workdir=tmp, default_agent="scripted:replies.yaml", heartbeat_s=HEARTBEAT_S
        )
        worker = worker_process(
            address, "-m", "agentrun.worker", "--task-queue", QUEUE, "--max-cached-workflows", str(cache)
        )
        try:
            began = time.perf_counter()
            ids = await start_all(client, inp, count)
            await until_waiting(client, count)
            say(f"  started and all waiting: {time.perf_counter() - began:.1f} s")
            listed_s, found = await timed(humans.pending(client))
            questions = [q for q in found.questions if q.run_id.startswith("waiting-")]
            say(f"  pending --all listed {len(questions)} questions in {listed_s:.2f} s (from the runs' memos)")
            page_s, page = await timed(humans.pending(client, PAGE))
            say(f"  pending (the {PAGE} latest, {page.more} more counted) in {page_s:.2f} s")
            if old:
                old_s, _ = await timed(humans.waiting_states(client))
                say(f"  the old way, a query to each run: {old_s:.1f} s")
            if list_only:
                say(f"  worker peak RSS: {peak_rss_mb(worker.pid):.0f} MB (no approvals sent)")
                return
            answered_s, (refused, states) = await timed(approve_all(client, ids))
            say(f"  worker peak RSS: {peak_rss_mb(worker.pid):.0f} MB")
        finally:
            stop(worker)
    completed = sum(1 for s in states if s.status == "completed")
    say(f"  approved all in {answered_s:.1f} s ({count / answered_s:.0f}/s); completed: {completed}/{count}")
    for line in refused[:5]:
        say(f"  not taken: {line}")


async def main(args: argparse.Namespace) -> None:
    env = await dev_server()
    async with env:
        address = env.client.service_client.config.target_host
        for count in [int(n) for n in args.runs.split(",")]:
            await bench(env.client, address, count, args.cache or max(1, count // 4), args.old, args.list_only)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Runs waiting at a gate: memory, listing and answering.")
    parser.add_argument("--runs", default="1000", help="waiting runs, comma-separated (1000,5000,10000)")
    parser.add_argument("--cache", type=int, default=0, help="the worker's --max-cached-workflows (default runs/4)")
    parser.add_argument("--old", action="store_true", help="also list them the old way, a query to each run")
    parser.add_argument("--list-only", action="store_true", help="start and list them, send no approval")
    arguments = parser.parse_args()
    asyncio.run(main(arguments))
    sys.stdout.flush()
    os._exit(0)  # as bench/scale.py: the SDK's native threads may outlive the interpreter
