"""One chain of instant-agent steps through agentrun, raw Temporal and LangGraph's checkpointers.

    pip install -e ".[bench]"
    python bench/peers.py [--steps 200] [--repeat 3] [--postgres-url postgresql://USER:PW@127.0.0.1/DB]

- agentrun: the AgentRun workflow runs a task-tree spec of N chained tasks whose agent answers at
  once (`scripted:` replies), on a dev server started as the embedded one is (its dynamic config,
  its SQLite database in a file), with a worker in this process.
- raw Temporal: RawChain (bench/overhead.py) calls the same `run_agent` activity N times, same server.
- LangGraph + SQLite: a StateGraph of N nodes in a row, each calling an instant agent (a function
  returning the same reply), compiled with SqliteSaver on a file, durability "sync": each step's
  checkpoint is written before the next step starts.
- LangGraph + Postgres: the same with PostgresSaver, when --postgres-url is given.

The sides run alternately, `--repeat` times each after a warm-up; figures are medians, ms per step,
wall and this process's CPU (the Temporal and Postgres servers' CPU is not counted).
"""

from __future__ import annotations

import argparse
import asyncio
import operator
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parent))

from overhead import REPLY, Sample, bench_worker, dev_server, run_engine, run_raw, side_by_side, write_chain  # noqa: E402

from agentrun.lang.load import load  # noqa: E402

WARM_UP_STEPS = 20


class ChainState(TypedDict):
    reply: str
    steps: Annotated[int, operator.add]


def instant_agent(prompt: str) -> str:
    return REPLY


def langgraph_chain(steps: int, checkpointer: Any) -> Any:
    """N nodes in a row, each asking the instant agent with its own prompt."""
    from langgraph.graph import END, START, StateGraph  # pyright: ignore[reportMissingImports] (the bench extra)

    graph = StateGraph(ChainState)
    names = [f"t{i:03d}" for i in range(1, steps + 1)]
    for i, name in enumerate(names, 1):
        graph.add_node(name, lambda state, i=i: {"reply": instant_agent(f"step {i}"), "steps": 1})
    for a, b in zip([START, *names], [*names, END], strict=True):
        graph.add_edge(a, b)
    return graph.compile(checkpointer=checkpointer)


def run_langgraph(graph: Any, steps: int, thread: str) -> Sample:
    """A fresh thread: a Postgres database outlives the bench, and a thread's state carries over."""
    config = {"configurable": {"thread_id": f"{thread}-{uuid.uuid4().hex[:8]}"}, "recursion_limit": steps + 10}
    wall, cpu = time.perf_counter(), time.process_time()
    state = graph.invoke({"reply": "", "steps": 0}, config, durability="sync")
    sample = Sample(time.perf_counter() - wall, time.process_time() - cpu)
    if state["steps"] != steps or state["reply"] != REPLY:
        raise RuntimeError(f"unexpected result: {state!r}")
    return sample


def langgraph_sides(folder: Path, steps: int, postgres_url: str | None) -> dict[str, Callable[[int, str], Sample]]:
    """One callable per LangGraph side: run a chain of `steps` on a thread of its own."""
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver  # pyright: ignore[reportMissingImports]

    sqlite = SqliteSaver(sqlite3.connect(folder / "langgraph.db", check_same_thread=False))
    graphs = {"langgraph+sqlite": {n: langgraph_chain(n, sqlite) for n in {steps, WARM_UP_STEPS}}}
    if postgres_url:
        from langgraph.checkpoint.postgres import PostgresSaver  # pyright: ignore[reportMissingImports]
        from psycopg import Connection  # pyright: ignore[reportMissingImports]

        connection = Connection.connect(postgres_url, autocommit=True, prepare_threshold=0)
        postgres = PostgresSaver(connection)  # type: ignore[arg-type]
        postgres.setup()
        graphs["langgraph+postgres"] = {n: langgraph_chain(n, postgres) for n in {steps, WARM_UP_STEPS}}
    return {
        side: (lambda n, thread, by_size=by_size: run_langgraph(by_size[n], n, thread))
        for side, by_size in graphs.items()
    }


async def bench(steps: int, repeat: int, postgres_url: str | None) -> None:
    with tempfile.TemporaryDirectory(prefix="agentrun-peers-") as tmp:
        folder, uri = Path(tmp), "scripted:replies.yaml"
        env = await dev_server(tuned=True, db_file=folder / "temporal.db")
        warm_plan = load(str(write_chain(folder, WARM_UP_STEPS)))
        plan = load(str(write_chain(folder, steps)))
        samples: dict[str, list[Sample]] = {"agentrun": [], "raw temporal": []}
        peers = langgraph_sides(folder, steps, postgres_url)
        samples.update({side: [] for side in peers})
        async with env, bench_worker(env.client):
            await run_engine(env.client, warm_plan, tmp, uri)  # warm-ups, not counted
            await run_raw(env.client, warm_plan, tmp, uri)
            for side, run in peers.items():
                run(WARM_UP_STEPS, f"{side}-warm")
            for r in range(repeat):
                ours, theirs = await side_by_side(env.client, plan, tmp, uri, r)
                samples["agentrun"].append(ours)
                samples["raw temporal"].append(theirs)
                for side, run in peers.items():
                    samples[side].append(run(steps, f"{side}-{r}"))
    report(samples, steps, repeat, postgres_url)


def report(samples: dict[str, list[Sample]], steps: int, repeat: int, postgres_url: str | None) -> None:
    wall = {side: statistics.median(s.wall_s for s in runs) / steps * 1000 for side, runs in samples.items()}
    cpu = {side: statistics.median(s.cpu_s for s in runs) / steps * 1000 for side, runs in samples.items()}
    print(f"{steps}-step chain of an instant agent, {repeat} runs each, alternating (medians per step)")
    print(f"{'side':20s} {'wall ms/step':>12s} {'cpu ms/step':>12s} {'wall / agentrun':>16s}  runs (s)")
    for side, runs in samples.items():
        each = ", ".join(f"{s.wall_s:.2f}" for s in runs)
        print(f"{side:20s} {wall[side]:12.2f} {cpu[side]:12.2f} {wall[side] / wall['agentrun']:16.2f}  {each}")
    print(
        f"agentrun / raw temporal: {wall['agentrun'] / wall['raw temporal']:.2f} wall, "
        f"{cpu['agentrun'] / cpu['raw temporal']:.2f} cpu"
    )
    if not postgres_url:
        print("langgraph+postgres: not run (no --postgres-url)")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="steps in the chain (default 200)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each side (default 3)")
    parser.add_argument("--postgres-url", help="a PostgreSQL database for LangGraph's Postgres checkpointer")
    args = parser.parse_args()
    asyncio.run(bench(args.steps, args.repeat, args.postgres_url))


if __name__ == "__main__":
    main()
