"""What the engine's workflow code costs a step, in CPU instructions: the same figure on every run.

    python bench/instructions.py [--tasks 200]

Wall time and CPU move by ±5 % from one run of overhead.py to the next, more than a change to the
interpreter's hot path moves them. Instructions do not: this records one run of the engine's chain
and one of RawChain (overhead.py's two sides) on a dev server, then replays each history once under
valgrind's callgrind with no server at all, and counts the instructions each thread executed:

- `activations`: the threads that run workflow code (the SDK's activations: our interpreter, or
  RawChain's loop, and the SDK's conversion of their values);
- `event loop`: the main thread (the SDK's worker loop, its payload visitors, the replayer);
- the SDK's native threads are left out: their polling depends on timing, not on the workflow.

Each figure is per step (divided by --tasks); two runs of the same code agree within 0.1 %. It needs
valgrind (Debian's `valgrind` package). A replay is not a live run: no activity runs and nothing
goes over the network, so these are the workflow's own costs, which overhead.py's live figures add
to the rest of a step.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from overhead import RawChain, bench_worker, dev_server, run_engine, run_raw, write_chain
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from agentrun.lang.load import load
from agentrun.worker.blobs import data_converter
from agentrun.worker.build import WORKFLOWS, runner

SIDES = {"engine": "AgentRun", "raw": "RawChain"}


async def record(folder: Path, tasks: int) -> dict[str, Path]:
    """One run of each side on a fresh dev server; their histories as JSON files. A replay does not
    depend on how warm the worker was that recorded it, so nothing runs before them."""
    env = await dev_server()
    async with env:
        plan = load(str(write_chain(folder, tasks)))
        uri, workdir = "scripted:replies.yaml", str(folder)
        async with bench_worker(env.client):
            await run_engine(env.client, plan, workdir, uri)
            await run_raw(env.client, plan, workdir, uri)
        files = {}
        async for run in env.client.list_workflows():
            side = next(s for s, name in SIDES.items() if name == run.workflow_type)
            files[side] = folder / f"{side}.json"
            history = await env.client.get_workflow_handle(run.id, run_id=run.run_id).fetch_history()
            files[side].write_text(history.to_json())
        return files


async def replay(history_file: Path) -> None:
    """Replay once to warm up, then once with callgrind counting (this process runs under valgrind)."""
    side = history_file.stem
    replayer = Replayer(workflows=[*WORKFLOWS, RawChain], workflow_runner=runner(), data_converter=data_converter())
    history = WorkflowHistory.from_json(SIDES[side], history_file.read_text())
    await replayer.replay_workflow(history)
    # As a worker does once it has loaded (agentrun.startup): a full collection then walks only what
    # the runs made, not the few hundred thousand objects of the imports, and where one falls
    # (which moves with any change to what is allocated) no longer shifts a count by 10 %.
    gc.collect()
    gc.freeze()
    subprocess.run(["callgrind_control", "--instr=on", str(os.getpid())], check=True, capture_output=True)
    await replayer.replay_workflow(history)
    subprocess.run(["callgrind_control", "--instr=off", str(os.getpid())], check=True, capture_output=True)


def count(history_file: Path, out: Path) -> dict[str, int]:
    """Instructions of one counted replay, by kind of thread: event loop, activations."""
    prefix = out / history_file.stem
    subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            "--separate-threads=yes",
            f"--callgrind-out-file={prefix}",
            sys.executable,
            __file__,
            "--replay",
            str(history_file),
        ],
        check=True,
        capture_output=True,
        env={**os.environ, "PYTHONHASHSEED": "0"},  # the same dict and set orders, so the same count
    )
    totals = {"event loop": 0, "activations": 0}
    for dump in sorted(out.glob(f"{history_file.stem}-*")):
        text = dump.read_text(errors="replace")
        found = re.search(r"^totals: (\d+)", text, re.MULTILINE)
        if found is None:
            continue
        if dump.name.endswith("-01"):
            totals["event loop"] += int(found[1])
        elif "PyEval_EvalFrameDefault" in text:  # a Python thread: the SDK's workflow executor
            totals["activations"] += int(found[1])
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200, help="tasks in the chain (default 200)")
    parser.add_argument("--replay", type=Path, help=argparse.SUPPRESS)  # the child under valgrind
    args = parser.parse_args()
    if args.replay:
        asyncio.run(replay(args.replay))
        return
    if shutil.which("valgrind") is None:
        sys.exit("bench/instructions.py needs valgrind\n  hint: apt-get install valgrind")
    with tempfile.TemporaryDirectory(prefix="agentrun-instructions-") as tmp:
        folder = Path(tmp)
        files = asyncio.run(record(folder, args.tasks))
        counts = {side: count(files[side], folder) for side in SIDES}
    print(f"{args.tasks} tasks, one replay of each side under callgrind; instructions per step")
    for kind in ("activations", "event loop"):
        engine, raw = counts["engine"][kind] / args.tasks, counts["raw"][kind] / args.tasks
        print(f"  {kind + ':':13s} engine {engine:>11,.0f}  raw {raw:>11,.0f}  engine / raw {engine / raw:.2f}")
    engine, raw = (sum(counts[side].values()) / args.tasks for side in SIDES)
    print(f"  {'both:':13s} engine {engine:>11,.0f}  raw {raw:>11,.0f}  engine / raw {engine / raw:.2f}")


if __name__ == "__main__":
    main()
