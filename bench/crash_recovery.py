"""How long a run takes to go on after `kill -9` of the worker running it, with the engine's default
settings (no AGENTRUN_HEARTBEAT_S, no AGENTRUN_STICKY_S), on one dev server of its own.

    python bench/crash_recovery.py [--repeat 2]

Each case runs a one-step run on a worker process (`python -m agentrun.worker`), killed with SIGKILL
while the step's work is under way; a second worker, started just before the kill so its start-up
is not counted, takes the run over. The three cases:
- agent call: a task tree's step with its agent (the shell agent of examples/agents behind a fake agentapi
  server on loopback, busy 5 s a prompt); killed once the agent has the prompt;
- tool call: a model's bash call, `echo start >> tally.txt; sleep 5; echo end >> tally.txt`;
  killed once `start` is written;
- model turn: a model's turn in a tool loop (its second, after a bash call), held by the fake
  OpenAI server; killed while held.
Printed per case, the median of `--repeat` runs: `again`, from the kill to the moment the work
reached the outside world again (the agent's second prompt, the second `start`, the model's next
request), and `done`, from the kill to the run's completion (which includes the work's own time:
5 s for the agent and the command).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

from overhead import dev_server  # noqa: E402
from temporalio.client import Client, WorkflowExecutionStatus  # noqa: E402

import agentrun  # noqa: E402
from tests.fakes.agentapi_server import FakeAgentAPI  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI, Messages, Reply, ToolUse  # noqa: E402
from tests.runs import SHELL_BRAIN, sh  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
QUEUE = "agentrun-bench-crash"
POLL_S = 0.02
PIPELINE = """
workflow:
  name: crash
  agents:
    m:
      prompt: "Run the command you are given with bash."
      tools: [Bash]
  steps:
    - id: work
      agent: m
"""
# A task tree's step (its agent is reused, as a server you started): the shell agent runs the fenced line.
TREE = "name: crash\nsubtasks:\n  t1: {instructions: " + sh("echo done") + "}\n"


def command_model(command: str) -> Callable[[Messages], Reply]:
    """A model that runs `command` with bash once, then says it is done."""

    def reply(messages: Messages) -> Reply:
        return "done" if any(m["role"] == "tool" for m in messages) else ToolUse("bash", {"command": command})

    return reply


class Case:
    """One run of one case: its folder, its environment, its workers."""

    def __init__(self, address: str, folder: Path, env: dict[str, str]):
        self.address, self.folder = address, folder
        self.env = {**os.environ, "TEMPORAL_ADDRESS": address, "AGENTRUN_STATE_DIR": str(folder / "state"), **env}
        for name in ("AGENTRUN_HEARTBEAT_S", "AGENTRUN_STICKY_S", "TEMPORAL_PROFILE"):
            self.env.pop(name, None)  # the engine's defaults
        self.work = folder / "work"
        self.work.mkdir(parents=True)
        self.rid = f"crash-bench-{uuid.uuid4().hex[:8]}"
        self.workers: list[subprocess.Popen[bytes]] = []

    def worker(self) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [sys.executable, "-u", "-m", "agentrun.worker", "--task-queue", QUEUE],
            env=self.env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert proc.stdout is not None and b"worker polling" in proc.stdout.readline(), "the worker did not start"
        self.workers.append(proc)
        return proc

    def start(self, spec: str, agent: str) -> None:
        path = self.folder / "spec.yaml"
        path.write_text(spec)
        argv = ["start", str(path), "--agent", agent, "--id", self.rid, "--task-queue", QUEUE]
        argv += ["--workdir", str(self.work), "--detach"]
        done = subprocess.run(
            [sys.executable, "-m", "agentrun.client", *argv], env=self.env, cwd=ROOT, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr

    def kill_first(self) -> float:
        """Start the standby worker, then kill -9 the first; the moment of the kill."""
        first = self.workers[0]
        self.worker()
        os.kill(first.pid, signal.SIGKILL)
        killed = time.monotonic()
        first.wait()
        return killed

    async def finished(self, client: Client) -> None:
        handle = client.get_workflow_handle(self.rid)
        while (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
            await asyncio.sleep(POLL_S)
        ended = (await handle.describe()).status
        assert ended == WorkflowExecutionStatus.COMPLETED, f"run {self.rid} ended {ended}"

    def stop(self) -> None:
        for proc in self.workers:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=30)


async def until(predicate: Callable[[], bool], timeout_s: float = 300) -> float:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(POLL_S)
    return time.monotonic()


async def agent_call(client: Client, case: Case) -> tuple[float | None, float]:
    with FakeAgentAPI(command=SHELL_BRAIN, busy_s=5.0, cwd=str(case.work)) as agent:
        case.worker()
        case.start(TREE, f"agentapi:{agent.url}")
        await until(lambda: len(agent.received) == 1)
        killed = case.kill_first()
        again = await until(lambda: len(agent.received) == 2)
        await case.finished(client)
    return again - killed, time.monotonic() - killed


async def tool_call(client: Client, case: Case) -> tuple[float | None, float]:
    tally = case.work / "tally.txt"
    model = command_model("echo start >> tally.txt; sleep 5; echo end >> tally.txt")

    def starts() -> int:
        return tally.read_text().count("start") if tally.exists() else 0

    with FakeOpenAI(model, api_key="sk-bench") as llm:
        case.env |= {"OPENAI_BASE_URL": llm.url, "OPENAI_API_KEY": "sk-bench"}
        case.worker()
        case.start(PIPELINE, "openai:m")
        await until(lambda: starts() == 1)
        killed = case.kill_first()
        # Before tool calls heartbeated, the call was never attempted again: the run went on without it.
        ended = asyncio.ensure_future(case.finished(client))
        again = await until(lambda: starts() == 2 or ended.done())
        await ended
    return (again - killed if starts() == 2 else None), time.monotonic() - killed


async def model_turn(client: Client, case: Case) -> tuple[float | None, float]:
    with FakeOpenAI(command_model("echo ran-1"), api_key="sk-bench") as llm:
        case.env |= {"OPENAI_BASE_URL": llm.url, "OPENAI_API_KEY": "sk-bench"}
        held = llm.hold_prompt("ran-1")
        case.worker()
        case.start(PIPELINE, "openai:m")
        await until(lambda: llm.in_flight("m") == 1)
        killed = case.kill_first()
        held.set()
        again = await until(lambda: len(llm.requests_for("m")) == 3)
        await case.finished(client)
    return again - killed, time.monotonic() - killed


def line(name: str, figures: list[tuple[float | None, float]]) -> str:
    """`tool call: again 6.2 s after the kill, done 9.0 s (run by run: again 6.1, 6.3)`; `never`
    for work that was not attempted again (the run went on without it)."""
    agains = [a for a, _ in figures if a is not None]
    again = f"again {statistics.median(agains):.1f} s after the kill" if agains else "never attempted again"
    done = statistics.median(d for _, d in figures)
    each = ", ".join("never" if a is None else f"{a:.1f}" for a, _ in figures)
    return f"{name}: {again}, done {done:.1f} s (run by run, again: {each})"


CASES = {"agent call": agent_call, "tool call": tool_call, "model turn": model_turn}


async def bench(repeat: int) -> None:
    env = await dev_server()
    async with env:
        address = env.client.service_client.config.target_host
        with tempfile.TemporaryDirectory(prefix="agentrun-bench-crash-") as tmp:
            for name, measure in CASES.items():
                figures: list[tuple[float | None, float]] = []
                for i in range(repeat):
                    case = Case(address, Path(tmp) / f"{name.replace(' ', '-')}-{i}", {})
                    try:
                        figures.append(await measure(env.client, case))
                    finally:
                        case.stop()
                print(line(name, figures))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=2)
    # agentrun.run: the SDK's threads can abort a finalizing interpreter after the figures are printed.
    agentrun.run(bench(parser.parse_args().repeat))


if __name__ == "__main__":
    main()
