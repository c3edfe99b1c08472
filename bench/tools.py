"""A tool call's cost against a plain Temporal activity doing the same work, on one dev server in one
run.

    python bench/tools.py [--calls 200] [--repeat 3]

Three workflows on one worker in this process each read the same small file `--calls` times in a row,
one activity per read, with the timeouts the tool loop gives its calls:
- plain: `plain_read`, an activity written here that opens the file and returns its text;
- built-in: the engine's `run_tool` activity with a `read` call under the default policy (the path
  confined to the work directory, protected names refused, the output capped);
- mcp: the engine's `call_mcp_tool` activity calling `read_file` of an MCP server written with the
  SDK (tests/fakes/mcp_server.py, over stdio), started once and kept by the worker.
A warm-up run of each first (it starts the MCP server), then `--repeat` rounds of the three, the
order turning each round. Printed: ms per call (median) and each tool's ratio to plain, for wall
time and this process's CPU (the MCP server's own CPU is not counted).

Then a bash call's cost (`true`, through the run_tool activity, `--bash-calls` in a row, median of
`--repeat` rounds): outside the OS boundary (the policy's `sandbox = "off"`) and inside it, with
each layer this machine has alone (bubblewrap, Landlock) and both (what a worker uses).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment
from temporalio.worker import Worker

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

from overhead import Sample, dev_server  # noqa: E402

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel

    from agentrun.activities.mcp import connections
    from agentrun.activities.tools import wall
    from agentrun.activities.tools.run import run_tool
    from agentrun.lang.mcp_servers import McpServer
    from agentrun.models.mcp import CALL_MCP_TOOL, McpCallInput
    from agentrun.models.tools import RUN_TOOL, ToolCall, ToolCallInput, ToolPolicy, ToolResult
    from agentrun.worker.build import ACTIVITIES, WORKFLOWS, runner

QUEUE = "agentrun-bench-tools"
PLAIN_READ = "plain_read"
TEXT = "a line of text a tool reads\n" * 20
TIMEOUT = timedelta(seconds=60)


class Chain(BaseModel):
    side: str  # plain, builtin or mcp
    calls: int
    workdir: str
    server: McpServer


@activity.defn(name=PLAIN_READ)
async def plain_read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


@workflow.defn(name="ToolChain")
class ToolChain:
    """`calls` reads in a row, each one activity of the chosen side; the characters read in all."""

    @workflow.run
    async def run(self, chain: Chain) -> int:
        read = 0
        for n in range(chain.calls):
            read += len(await self._one(chain, n))
        return read

    async def _one(self, chain: Chain, n: int) -> str:
        path = f"{chain.workdir}/note.txt"
        if chain.side == "plain":
            return await workflow.execute_activity(PLAIN_READ, path, result_type=str, start_to_close_timeout=TIMEOUT)
        if chain.side == "builtin":
            call = ToolCallInput(
                call=ToolCall(id=f"c{n}", name="read", arguments={"path": "note.txt"}), workdir=chain.workdir
            )
            result = await workflow.execute_activity(
                RUN_TOOL, call, result_type=ToolResult, start_to_close_timeout=TIMEOUT
            )
        else:
            call = McpCallInput(
                server=chain.server,
                tool="read_file",
                call_id=f"c{n}",
                name="mcp_fake_read_file",
                arguments={"path": path},
            )
            result = await workflow.execute_activity(
                CALL_MCP_TOOL, call, result_type=ToolResult, start_to_close_timeout=TIMEOUT
            )
        if not result.ok:
            raise RuntimeError(f"{chain.side}: {result.error}")
        return result.content


async def run_chain(client: Client, chain: Chain) -> Sample:
    wall, cpu = time.perf_counter(), time.process_time()
    read = await client.execute_workflow(ToolChain.run, chain, id=f"tools-{uuid.uuid4().hex[:8]}", task_queue=QUEUE)
    sample = Sample(time.perf_counter() - wall, time.process_time() - cpu)
    if read != len(TEXT) * chain.calls:
        raise RuntimeError(f"{chain.side} read {read} characters")
    return sample


def per_call(samples: list[Sample], calls: int) -> str:
    wall = statistics.median(s.wall_s for s in samples) / calls * 1000
    cpu = statistics.median(s.cpu_s for s in samples) / calls * 1000
    return f"{wall:.2f} ms/call wall, {cpu:.2f} ms/call cpu (runs: {', '.join(f'{s.wall_s:.2f}' for s in samples)} s)"


def ratio(side: list[Sample], plain: list[Sample]) -> str:
    def median(samples: list[Sample], of: Callable[[Sample], float]) -> float:
        return statistics.median(of(s) for s in samples)

    wall = median(side, lambda s: s.wall_s) / median(plain, lambda s: s.wall_s)
    cpu = median(side, lambda s: s.cpu_s) / median(plain, lambda s: s.cpu_s)
    pairs = sorted(s.wall_s / p.wall_s for s, p in zip(side, plain))
    return f"{wall:.2f} wall, {cpu:.2f} cpu (run by run: {pairs[0]:.2f}–{pairs[-1]:.2f} wall)"


async def bench(calls: int, repeat: int) -> None:
    env = await dev_server()
    async with env:
        worker = Worker(
            env.client,
            task_queue=QUEUE,
            workflows=[*WORKFLOWS, ToolChain],
            activities=[*ACTIVITIES, plain_read],
            workflow_runner=runner(),
            max_concurrent_activities=100,
            graceful_shutdown_timeout=timedelta(seconds=10),
        )
        with tempfile.TemporaryDirectory(prefix="agentrun-bench-") as tmp:
            (Path(tmp) / "note.txt").write_text(TEXT)
            fake = Path(__file__).resolve().parent.parent / "tests" / "fakes" / "mcp_server.py"
            # Behind the boundary it sees its script and the file it reads when the declaration opens them.
            server = McpServer(id="fake", command=sys.executable, args=[str(fake)], allow_read=[str(fake.parent), tmp])
            sides = ("plain", "builtin", "mcp")
            chains = {side: Chain(side=side, calls=calls, workdir=tmp, server=server) for side in sides}
            samples: dict[str, list[Sample]] = {side: [] for side in sides}
            async with worker:
                for side in sides:
                    await run_chain(env.client, chains[side].model_copy(update={"calls": min(calls, 20)}))
                for i in range(repeat):
                    for side in sides[i % 3 :] + sides[: i % 3]:
                        samples[side].append(await run_chain(env.client, chains[side]))
                await connections.close_all()
    for side in sides:
        print(f"{side + ':':9}{per_call(samples[side], calls)}")
    print(f"built-in read / plain activity: ratio {ratio(samples['builtin'], samples['plain'])}")
    print(f"mcp call / plain activity:      ratio {ratio(samples['mcp'], samples['plain'])}")


async def bash_calls(calls: int, repeat: int) -> None:
    """ms per bash call outside the boundary and inside it, by layer."""
    found = wall.layers()
    sides: dict[str, wall.Layers | None] = {
        "outside": None,
        "bubblewrap": wall.Layers(found.bwrap, 0),
        "landlock": wall.Layers("", found.landlock),
        "both": found,
    }
    medians: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="agentrun-bench-") as tmp:
        for name, layers in sides.items():
            if layers is not None and not layers.any:
                print(f"bash, {name + ':':12}not on this machine")
                continue
            call = ToolCallInput(
                call=ToolCall(id="b", name="bash", arguments={"command": "true"}),
                workdir=tmp,
                policy=ToolPolicy(sandbox=layers is not None),
            )
            wall.layers = (lambda chosen=layers: chosen) if layers is not None else (lambda: found)  # type: ignore[assignment]
            rounds = []
            for _ in range(repeat):
                started = time.perf_counter()
                for _ in range(calls):
                    result = await ActivityEnvironment().run(run_tool, call)
                    if not result.ok:
                        raise RuntimeError(f"bash {name}: {result.content}")
                rounds.append((time.perf_counter() - started) / calls * 1000)
            medians[name] = statistics.median(rounds)
            print(f"bash, {name + ':':12}{medians[name]:.1f} ms/call (rounds: {', '.join(f'{r:.1f}' for r in rounds)})")
    if "both" in medians:
        print(f"bash inside / outside the boundary: ratio {medians['both'] / medians['outside']:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="reads in one run (default 200)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each side (default 3)")
    parser.add_argument("--bash-calls", type=int, default=50, help="bash calls in one round (default 50)")
    args = parser.parse_args()
    asyncio.run(bench(args.calls, args.repeat))
    asyncio.run(bash_calls(args.bash_calls, args.repeat))


if __name__ == "__main__":
    main()
