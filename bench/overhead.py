"""Engine overhead against raw Temporal, on the same dev server in the same run.

    python bench/overhead.py [--tasks 200] [--repeat 3]

Engine: the AgentRun workflow runs a task-tree spec of N chained tasks whose agent answers at once
(`scripted:` replies). Raw: RawChain, a hand-written workflow that calls the same `run_agent`
activity N times in a row with the same AgentCall, and does nothing else. Both run on one worker
in this process, alternately (engine first in one pair, raw first in the next); the medians give ms
per task and `ratio` (engine / raw, for wall time and CPU, with the spread of the ratios run by run).

Then `python -m client start` runs a 1-task spec against the same, warm server, with a `command:`
agent that writes the time it was invoked to a file: start-to-first-prompt is the time from just
before the CLI process starts to that moment, handed to the fork server (agentrun.forkserver) and
in a process of its own (AGENTRUN_FORKSERVER=off), alternating. The bench worker polls its own
queue, so the CLI finds no worker on the default queue and starts its own, as it does for a user.

Before all that, the everyday commands: `python -m client --help`, `validate`, `inspect` and
`dry-run` on the quickstart, beside `python -c pass`, alternating, best and median wall time
(`--only-cli`: these and start-to-first-prompt alone).

Last, tracing: two `python -m worker` processes, one with no OTEL_* variable and one exporting
traces and metrics (OTEL_EXPORTER_OTLP_ENDPOINT) to an OTLP/HTTP receiver on loopback, run the
same chain alternately; `tracing ratio` is on / off, for wall time and for the workers' CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from temporalio import workflow
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

# bench/sandbox.py runs RawChain in the sandbox, which re-imports this file: our modules come from outside it.
with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel

    from agentrun import handoff, launcher
    from agentrun.lang import ir
    from agentrun.lang.load import load
    from agentrun.models import contract
    from agentrun.models.calls import RUN_AGENT, AgentCall, AgentReply
    from agentrun.models.contract import RunInput, RunState
    from agentrun.worker.blobs import data_converter
    from agentrun.worker.build import ACTIVITIES, WORKFLOWS, runner
    from agentrun.worker.embedded import database_args, temporal_binary, tuning_args
    from agentrun.workflows.protocols import status

BENCH_QUEUE = "agentrun-bench"
TRACING_QUEUES = {"off": "agentrun-bench-plain", "on": "agentrun-bench-traced"}
HEARTBEAT_S = 30.0
WARM_UP_TASKS = 20
REPLY = "done\nCOMPLETION_STATUS: COMPLETE"


class RawInput(BaseModel):
    calls: list[AgentCall]
    heartbeat_s: float


@workflow.defn(name="RawChain")
class RawChain:
    """The baseline: one run_agent activity per call, in sequence."""

    @workflow.run
    async def run(self, inp: RawInput) -> str:
        reply = ""
        for call in inp.calls:
            result = await workflow.execute_activity(
                RUN_AGENT,
                call,
                result_type=AgentReply,
                start_to_close_timeout=timedelta(seconds=call.timeout_s),
                heartbeat_timeout=timedelta(seconds=inp.heartbeat_s),
            )
            reply = result.text
        return reply


def write_chain(folder: Path, tasks: int) -> Path:
    """A task-tree spec of `tasks` chained tasks, and the instant scripted agent's replies next to it."""
    lines = [f"name: chain{tasks}", "subtasks:"]
    lines += [f'  t{i:03d}:\n    instructions: "step {i}"' for i in range(1, tasks + 1)]
    spec = folder / f"chain{tasks}.yaml"
    spec.write_text("\n".join(lines) + "\n")
    (folder / "replies.yaml").write_text(f"default: {json.dumps(REPLY)}\n")  # JSON is YAML
    return spec


def raw_input(plan: ir.Plan, run_id: str, workdir: str, uri: str) -> RawInput:
    """The AgentCalls the engine sends for `plan`, built once, outside any workflow."""
    context = {
        "agent_type": uri.split(":", 1)[0],
        "skip_permissions": False,
        "workdir": workdir,
        "run_id": run_id,
        "iteration": 1,
    }
    calls = []
    for leaf in plan.leaves():
        assert isinstance(leaf, ir.Task)
        calls.append(
            AgentCall(
                run_id=run_id,
                task_id=leaf.id,
                agent_id=leaf.agent,
                uri=uri,
                prompt=status.prompt(leaf, context, None),
                workdir=workdir,
                lifecycle=plan.lifecycle,
                timeout_s=leaf.timeout_s or 1800,
            )
        )
    return RawInput(calls=calls, heartbeat_s=HEARTBEAT_S)


@dataclass
class Sample:
    wall_s: float
    cpu_s: float  # this process (worker, client, the SDK's native threads); the server is not counted


async def measure(run: Awaitable[object], expected: Callable[[object], bool]) -> Sample:
    wall, cpu = time.perf_counter(), time.process_time()
    result = await run
    sample = Sample(time.perf_counter() - wall, time.process_time() - cpu)
    if not expected(result):
        raise RuntimeError(f"unexpected result: {result!r}")
    return sample


async def run_engine(client: Client, plan: ir.Plan, workdir: str, uri: str, queue: str = BENCH_QUEUE) -> Sample:
    inp = RunInput(plan=plan, params={}, workdir=workdir, default_agent=uri, heartbeat_s=HEARTBEAT_S)
    run = client.execute_workflow(
        "AgentRun", inp, id=f"engine-{uuid.uuid4().hex[:8]}", task_queue=queue, result_type=RunState
    )
    return await measure(run, lambda state: isinstance(state, RunState) and state.status == "completed")


async def run_raw(client: Client, plan: ir.Plan, workdir: str, uri: str, queue: str = BENCH_QUEUE) -> Sample:
    run_id = f"raw-{uuid.uuid4().hex[:8]}"
    run = client.execute_workflow(RawChain.run, raw_input(plan, run_id, workdir, uri), id=run_id, task_queue=queue)
    return await measure(run, lambda reply: reply == REPLY)


async def side_by_side(client: Client, plan: ir.Plan, workdir: str, uri: str, i: int) -> tuple[Sample, Sample]:
    """The i-th pair of runs, engine and raw. Which one goes first alternates with `i`, so neither
    side always runs just after the other and meets what the server still does for it."""
    if i % 2:
        raw = await run_raw(client, plan, workdir, uri)
        return await run_engine(client, plan, workdir, uri), raw
    engine = await run_engine(client, plan, workdir, uri)
    return engine, await run_raw(client, plan, workdir, uri)


def start_to_first_prompt(folder: Path, address: str, forkserver: bool = True) -> float:
    """Seconds from just before `python -m client start` is spawned to its agent's first prompt;
    `forkserver`: handed to the fork server, else in a process of its own."""
    stamp = folder / "invoked-at"
    stamp.unlink(missing_ok=True)
    spec = folder / "one.yaml"
    spec.write_text('name: one\nsubtasks:\n  only:\n    instructions: "step 1"\n')
    # `date +%s.%N` is time.time() without an interpreter start-up before the clock is read.
    script = f"date +%s.%N > {shlex.quote(str(stamp))}; cat > /dev/null; echo 'COMPLETION_STATUS: COMPLETE'"
    agent = "command:sh -c " + shlex.quote(script)
    environ = {**os.environ, "TEMPORAL_ADDRESS": address, "AGENTRUN_STATE_DIR": str(folder / "state")}
    environ.pop("TEMPORAL_PROFILE", None)
    environ[launcher.ENV] = "on" if forkserver else "off"
    started = time.time()
    done = subprocess.run(
        [sys.executable, "-m", "agentrun.client", "start", str(spec), "--agent", agent],
        cwd=folder,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if done.returncode != 0:
        raise RuntimeError(f"client start exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return float(stamp.read_text()) - started


def ratios(engine: list[Sample], raw: list[Sample]) -> str:
    """Engine / raw of the medians, for wall time and CPU, and the spread of the ratios of the runs
    taken side by side (the i-th engine run against the i-th raw run)."""
    wall = statistics.median(s.wall_s for s in engine) / statistics.median(s.wall_s for s in raw)
    cpu = statistics.median(s.cpu_s for s in engine) / statistics.median(s.cpu_s for s in raw)
    pairs_wall = sorted(e.wall_s / r.wall_s for e, r in zip(engine, raw))
    pairs_cpu = sorted(e.cpu_s / r.cpu_s for e, r in zip(engine, raw))
    return (
        f"{wall:.2f} wall, {cpu:.2f} cpu (run by run: {pairs_wall[0]:.2f}–{pairs_wall[-1]:.2f} wall, "
        f"{pairs_cpu[0]:.2f}–{pairs_cpu[-1]:.2f} cpu)"
    )


def per_task(samples: list[Sample], tasks: int) -> str:
    wall = statistics.median(s.wall_s for s in samples) / tasks * 1000
    cpu = statistics.median(s.cpu_s for s in samples) / tasks * 1000
    runs = ", ".join(f"{s.wall_s:.2f}" for s in samples)
    return f"{wall:.2f} ms/task wall, {cpu:.2f} ms/task cpu (runs: {runs} s)"


@contextlib.contextmanager
def stdout_to_devnull() -> Iterator[None]:
    """The dev server inherits our stdout and prints a banner on it; keep that out of the figures."""
    sys.stdout.flush()
    saved = os.dup(1)
    with open(os.devnull, "wb") as null:
        os.dup2(null.fileno(), 1)
    try:
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


async def dev_server(tuned: bool = True, db_file: Path | None = None) -> WorkflowEnvironment:
    """A dev server of the bench's own, with the engine's converter and search attributes, in
    memory or in `db_file`; `tuned`: with the embedded server's dynamic config and SQLite pragmas,
    else with Temporal's defaults."""
    database = [] if db_file is None else database_args(db_file) if tuned else ["--db-filename", str(db_file)]
    extra = [*(tuning_args() if tuned else []), *database]
    with stdout_to_devnull():
        return await WorkflowEnvironment.start_local(
            dev_server_existing_path=temporal_binary(),
            data_converter=data_converter(),
            search_attributes=list(contract.SEARCH_ATTRIBUTES),
            dev_server_log_level="error",
            dev_server_startup_timeout=timedelta(seconds=90),
            dev_server_extra_args=extra,
        )


async def bench(tasks: int, repeat: int) -> None:
    env = await dev_server()
    async with env:
        worker = Worker(
            env.client,
            task_queue=BENCH_QUEUE,
            workflows=[*WORKFLOWS, RawChain],
            activities=ACTIVITIES,
            workflow_runner=runner(),
            max_concurrent_activities=100,
            graceful_shutdown_timeout=timedelta(seconds=10),
        )
        with tempfile.TemporaryDirectory(prefix="agentrun-bench-") as tmp:
            folder, uri = Path(tmp), "scripted:replies.yaml"
            warm_plan = load(str(write_chain(folder, min(tasks, WARM_UP_TASKS))))
            plan = load(str(write_chain(folder, tasks)))
            engine: list[Sample] = []
            raw: list[Sample] = []
            async with worker:
                await run_engine(env.client, warm_plan, tmp, uri)  # warm-ups, not counted
                await run_raw(env.client, warm_plan, tmp, uri)
                for i in range(repeat):
                    ours, theirs = await side_by_side(env.client, plan, tmp, uri, i)
                    engine.append(ours)
                    raw.append(theirs)
            print(
                f"{tasks} tasks, {repeat} runs each (medians), {os.cpu_count()} cores; "
                f"bench worker on queue '{BENCH_QUEUE}'"
            )
            print(f"engine: {per_task(engine, tasks)}")
            print(f"raw:    {per_task(raw, tasks)}")
            address = env.client.service_client.config.target_host
            print(await asyncio.to_thread(first_prompts, folder, address, repeat))
            print(f"ratio {ratios(engine, raw)}")
            await tracing_overhead(env.client, warm_plan, plan, tmp, uri, repeat)


class Receiver:
    """An OTLP/HTTP receiver on loopback that counts the spans it is sent and answers as a
    collector does; metrics are taken and dropped."""

    def __init__(self) -> None:
        self.spans = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                if self.path == "/v1/traces":
                    request = ExportTraceServiceRequest.FromString(body)
                    receiver.spans += sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> Receiver:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def worker_process(address: str, *command: str, telemetry: dict[str, str] | None = None) -> subprocess.Popen:
    """`python -u COMMAND…` against the bench's server, once it says it polls; no OTEL_* variable
    but `telemetry`'s."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    environ.update({"TEMPORAL_ADDRESS": address, **(telemetry or {})})
    environ.pop("TEMPORAL_PROFILE", None)
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.Popen([sys.executable, "-u", *command], env=environ, cwd=root, stdout=subprocess.PIPE)
    assert proc.stdout is not None and b"worker polling" in proc.stdout.readline(), "the worker did not start"
    return proc


def cpu_s(pid: int) -> float:
    """User and system CPU seconds of process `pid`, all its threads (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def run_on(client: Client, plan: ir.Plan, workdir: str, uri: str, queue: str, pid: int) -> Sample:
    """An engine run on the worker process polling `queue`; CPU is that process's."""
    inp = RunInput(plan=plan, params={}, workdir=workdir, default_agent=uri, heartbeat_s=HEARTBEAT_S)
    run = client.execute_workflow(
        "AgentRun", inp, id=f"engine-{uuid.uuid4().hex[:8]}", task_queue=queue, result_type=RunState
    )
    wall, cpu = time.perf_counter(), cpu_s(pid)
    state = await run
    sample = Sample(time.perf_counter() - wall, cpu_s(pid) - cpu)
    if state.status != "completed":
        raise RuntimeError(f"unexpected result: {state!r}")
    return sample


async def tracing_overhead(
    client: Client, warm_plan: ir.Plan, plan: ir.Plan, workdir: str, uri: str, repeat: int
) -> None:
    """The same chain on a worker with no OTEL_* variable and on one exporting to a loopback
    receiver (traces and metrics), alternately; the workers' own CPU is counted."""
    address = client.service_client.config.target_host
    samples: dict[str, list[Sample]] = {"off": [], "on": []}
    with Receiver() as receiver:
        exporting = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}
        workers = {
            side: worker_process(
                address, "-m", "agentrun.worker", "--task-queue", q, telemetry=exporting if side == "on" else {}
            )
            for side, q in TRACING_QUEUES.items()
        }
        try:
            for side, proc in workers.items():
                await run_on(client, warm_plan, workdir, uri, TRACING_QUEUES[side], proc.pid)  # warm-ups
            for _ in range(repeat):
                for side, proc in workers.items():
                    samples[side].append(await run_on(client, plan, workdir, uri, TRACING_QUEUES[side], proc.pid))
        finally:
            for proc in workers.values():
                proc.send_signal(signal.SIGTERM)
            for proc in workers.values():
                proc.wait(timeout=60)  # the traced one flushes what it still holds
        spans = receiver.spans
    tasks = len(plan.leaves())
    print(f"tracing off: {per_task(samples['off'], tasks)} (worker process cpu)")
    print(f"tracing on:  {per_task(samples['on'], tasks)} (worker process cpu; {spans} spans exported)")
    wall = [statistics.median(s.wall_s for s in samples[side]) for side in ("on", "off")]
    cpu = [statistics.median(s.cpu_s for s in samples[side]) for side in ("on", "off")]
    print(f"tracing ratio {wall[0] / wall[1]:.2f} wall, {cpu[0] / cpu[1]:.2f} cpu")


def bench_worker(client: Client) -> Worker:
    return Worker(
        client,
        task_queue=BENCH_QUEUE,
        workflows=[*WORKFLOWS, RawChain],
        activities=ACTIVITIES,
        workflow_runner=runner(),
        max_concurrent_activities=100,
        graceful_shutdown_timeout=timedelta(seconds=10),
    )


async def server_tuning(tasks: int, repeat: int) -> None:
    """The same chains on two dev servers that keep their state in a file, as the embedded one does:
    one with the embedded server's dynamic config and SQLite pragmas, one with Temporal's defaults.
    Both are up at once and the runs alternate between them."""
    with tempfile.TemporaryDirectory(prefix="agentrun-bench-") as tmp:
        folder, uri = Path(tmp), "scripted:replies.yaml"
        servers = {
            "untuned": await dev_server(tuned=False, db_file=folder / "untuned.db"),
            "tuned": await dev_server(tuned=True, db_file=folder / "tuned.db"),
        }
        samples: dict[str, list[Sample]] = {f"{s} {side}": [] for s in servers for side in ("engine", "raw")}
        try:
            async with contextlib.AsyncExitStack() as stack:
                for env in servers.values():
                    await stack.enter_async_context(bench_worker(env.client))
                warm_plan = load(str(write_chain(folder, min(tasks, WARM_UP_TASKS))))
                plan = load(str(write_chain(folder, tasks)))
                for env in servers.values():
                    await run_engine(env.client, warm_plan, tmp, uri)  # warm-ups, not counted
                    await run_raw(env.client, warm_plan, tmp, uri)
                for i in range(repeat):
                    for name, env in servers.items():
                        ours, theirs = await side_by_side(env.client, plan, tmp, uri, i)
                        samples[f"{name} engine"].append(ours)
                        samples[f"{name} raw"].append(theirs)
        finally:
            for env in servers.values():
                await env.shutdown()
    tuning = " ".join([*tuning_args(), *database_args(Path("FILE"))])
    print(f"server tuning, {tasks} tasks, {repeat} runs each, alternating; state in a SQLite file on both;")
    print(f"  tuned: {tuning}")
    for name, runs in samples.items():
        print(f"  {name + ':':16s}{per_task(runs, tasks)}")
    for side in ("engine", "raw"):
        wall = [statistics.median(s.wall_s for s in samples[f"{n} {side}"]) for n in servers]
        cpu = [statistics.median(s.cpu_s for s in samples[f"{n} {side}"]) for n in servers]
        print(f"  {side} tuned / untuned: {wall[1] / wall[0]:.2f} wall, {cpu[1] / cpu[0]:.2f} cpu")
    for name in servers:
        print(f"  engine / raw on the {name} server: {ratios(samples[f'{name} engine'], samples[f'{name} raw'])}")


# ---- the everyday commands: wall time of `python -m client …` as a person types it ----------------

# Not resolved: the workflow sandbox imports this module again (for RawChain) and refuses resolve().
REPO = Path(__file__).parent.parent
QUICKSTART = REPO / "examples" / "quickstart.yaml"
EVERYDAY = {
    "python -c pass": ["-c", "pass"],
    "--help": ["-m", "client", "--help"],
    "validate": ["-m", "client", "validate", str(QUICKSTART)],
    "inspect": ["-m", "client", "inspect", str(QUICKSTART)],
    "dry-run": ["-m", "client", "dry-run", str(QUICKSTART)],
}


def command_s(argv: list[str]) -> float:
    """Wall seconds of one run of `python ARGV` from the repository root; it must succeed."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, *argv], cwd=REPO, capture_output=True, text=True, timeout=60)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"python {' '.join(argv)} exited {done.returncode}:\n{done.stderr}")
    return elapsed


async def first_prompt_only(repeat: int) -> None:
    """start-to-first-prompt on a warm server of the bench's own, without the chains."""
    env = await dev_server()
    async with env:
        address = env.client.service_client.config.target_host
        with tempfile.TemporaryDirectory(prefix="agentrun-bench-") as tmp:
            print(await asyncio.to_thread(first_prompts, Path(tmp), address, repeat))


def first_prompts(folder: Path, address: str, repeat: int) -> str:
    """start-to-first-prompt on a warm server, through the fork server and in a process of its own,
    alternating after a warm-up of each. No worker polls the default queue, so each `start` runs its
    own worker on the run's own queue, as it does for a user."""
    handoff.ensure_server()
    ways = {"fork server": True, "own process": False}
    times: dict[str, list[float]] = {way: [] for way in ways}
    for forked in ways.values():
        start_to_first_prompt(folder, address, forked)  # warm-ups, not counted
    for _ in range(repeat):
        for way, forked in ways.items():
            times[way].append(start_to_first_prompt(folder, address, forked))
    lines = [f"start-to-first-prompt, warm server, {repeat} runs each:"]
    for way, seconds in times.items():
        runs = ", ".join(f"{s * 1000:.0f}" for s in seconds)
        lines.append(f"  {way:<12} {statistics.median(seconds) * 1000:5.0f} ms median (runs: {runs} ms)")
    return "\n".join(lines)


def everyday_commands(repeat: int) -> None:
    """Each command `repeat` times, the commands alternating, after one warm-up round: best and
    median wall ms, and the best against `python -c pass`'s."""
    for argv in EVERYDAY.values():
        command_s(argv)  # warm-up: the file cache, not counted
    times: dict[str, list[float]] = {name: [] for name in EVERYDAY}
    for _ in range(repeat):
        for name, argv in EVERYDAY.items():
            times[name].append(command_s(argv))
    bare = min(times["python -c pass"])
    print(f"everyday commands, {repeat} runs each, alternating (python -m client …, on {QUICKSTART.name})")
    for name, runs in times.items():
        ms = [t * 1000 for t in runs]
        print(
            f"  {name:<15} {min(ms):6.0f} ms best, {statistics.median(ms):6.0f} ms median, {min(runs) / bare:5.1f}x pass"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200, help="tasks in the chain (default 200)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each side (default 3)")
    parser.add_argument("--only-tuning", action="store_true", help="only the tuned / untuned server comparison")
    parser.add_argument("--only-cli", action="store_true", help="only the everyday commands and start-to-first-prompt")
    args = parser.parse_args()
    if args.only_cli:
        everyday_commands(max(args.repeat, 5))
        asyncio.run(first_prompt_only(args.repeat))
        return
    everyday_commands(max(args.repeat, 5))
    if not args.only_tuning:
        asyncio.run(bench(args.tasks, args.repeat))
    asyncio.run(server_tuning(args.tasks, args.repeat))


if __name__ == "__main__":
    main()
