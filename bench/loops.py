"""Long tool loops: what one step stores, and its time a turn, as the loop grows.

    python bench/loops.py [--turns 10,100,500] [--sizes 5000,20000] [--ways new,old,raw]
                          [--model reader] [--old-cap-mb 1000]

A pipeline agent granted `Read` reads N files of S random letters, one a turn, then answers: N
model turns (the fake OpenAI-compatible server of tests/fakes, on loopback) and N `read` calls.
Three ways, on one dev server and one worker in this process, in one run:
- new: the engine as it is: each turn's input names the step's conversation in the run's store;
- old: the engine as it was before (the turn's input carries the whole conversation), by putting
  back the pre-patch path of agentrun.workflows.threads for these runs;
- raw: RawLoop, a hand-written workflow that calls the same run_agent activity with the whole
  conversation each turn and the same run_tool read, as Pydantic AI's and the OpenAI Agents SDK's
  Temporal integrations pass it, and nothing else.
The model's name is `reader` unless --model names another: a name of a known family (`gpt-4o`)
brings its context window, past which the oldest results are cut in every way's requests alike
(agentrun.activities.context); `reader` has none, so each request carries the whole conversation and
grows with the loop (2.5 MB at 500 turns of 5 KB), which the model's side, in this process, parses.
An old or raw case whose inputs would add up to more than --old-cap-mb is not run (its size is
estimated instead: the quadratic sum of what each turn would send).

Printed for each case: history bytes (the run's events as the server returns them), blob bytes (the
run's folder of the blob store: large values and, new, its conversation logs), their sum against
the data the tools returned (`x data`, and the bytes a turn above twice the data), and ms per turn
(wall time of the run / turns).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import string
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(ROOT))

STATE = tempfile.mkdtemp(prefix="agentrun-bench-loops-")
os.environ["AGENTRUN_STATE_DIR"] = STATE  # the blob store's folder is this run's own, to measure
os.environ.pop("AGENTRUN_BLOB_URL", None)

from overhead import dev_server  # noqa: E402

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel

    from agentrun.lang.load import load
    from agentrun.models.calls import RUN_AGENT, AgentCall, AgentReply, ChatMessage
    from agentrun.models.contract import RunInput, RunState
    from agentrun.models.tools import RUN_TOOL, ToolCall, ToolCallInput, ToolResult, ToolSpec, builtin_specs
    from agentrun.worker.blobs import default_folder
    from agentrun.worker.build import ACTIVITIES, WORKFLOWS, runner
    from agentrun.workflows import threads
    from tests.fakes.openai_server import FakeOpenAI, Messages, ToolUse

QUEUE = "agentrun-bench-loops"
TIMEOUT = timedelta(seconds=300)
PROMPT = "Read the notes one by one and say how many you read."
SPEC = """
workflow:
  name: reader
  agents:
    reader:
      prompt: "{prompt}"
      tools: [Read]
      max_tool_calls: {calls}
  steps:
    - id: read
      agent: reader
"""


class RawInput(BaseModel):
    uri: str
    turns: int
    workdir: str
    offered: list[ToolSpec]


@workflow.defn(name="RawLoop")
class RawLoop:
    """A model turn with the whole conversation, then the read it asked for, until it answers."""

    @workflow.run
    async def run(self, inp: RawInput) -> str:
        transcript: list[ChatMessage] = []
        prompt = PROMPT
        for turn in range(inp.turns + 1):
            call = AgentCall(
                run_id=workflow.info().workflow_id,
                task_id="read",
                agent_id="reader",
                uri=inp.uri,
                prompt=prompt,
                workdir=inp.workdir,
                transcript=transcript,
                turn=turn,
                offered=inp.offered,
            )
            reply = await workflow.execute_activity(
                RUN_AGENT, call, result_type=AgentReply, start_to_close_timeout=TIMEOUT
            )
            if not reply.tool_calls:
                return reply.text
            asked = reply.tool_calls[0]
            said = [ChatMessage(role="user", content=prompt)] if prompt else []
            tool = ToolCallInput(
                call=ToolCall(id=asked.id, name="read", arguments={"path": f"note{turn}.txt"}), workdir=inp.workdir
            )
            result = await workflow.execute_activity(
                RUN_TOOL, tool, result_type=ToolResult, start_to_close_timeout=TIMEOUT
            )
            turned = ChatMessage(role="assistant", content=reply.text, tool_calls=reply.tool_calls)
            answer = ChatMessage(role="tool", content=result.content, tool_call_id=asked.id)
            transcript, prompt = [*transcript, *said, turned, answer], ""
        return "too many turns"


@dataclass
class Case:
    way: str
    turns: int
    size: int
    history: int = 0
    blobs: int = 0
    ms_per_turn: float = 0.0
    estimated: bool = False  # not run: too big

    @property
    def data(self) -> int:
        return self.turns * self.size

    def row(self) -> str:
        stored = self.history + self.blobs
        above = (stored - 2 * self.data) / self.turns
        ms = "not run" if self.estimated else f"{self.ms_per_turn:8.1f}"
        mark = "~" if self.estimated else " "
        return (
            f"{self.way:4} {self.turns:5} {self.size // 1000:4} KB {mark}{_mb(self.history):>10} {mark}{_mb(self.blobs):>10}"
            f" {stored / self.data:7.1f}x {above / 1000:9.1f} KB {ms:>9}"
        )


def _mb(size: int) -> str:
    return f"{size / 1_000_000:.2f} MB"


class _Counted(list):
    """What the fake keeps of its requests here: how many (its call ids number them), not their
    bodies. It keeps every body for tests to read; a 500-turn loop's would hold gigabytes in the
    process that measures, and its garbage collector would walk them all."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = 0

    def append(self, _record: object) -> None:
        self.seen += 1

    def __len__(self) -> int:
        return self.seen


def reader(turns: int) -> Callable[[Messages], ToolUse | str]:
    def model(messages: Messages) -> ToolUse | str:
        done = sum(1 for m in messages if m["role"] == "tool")
        return ToolUse("read", {"path": f"note{done}.txt"}) if done < turns else f"read {done}"

    return model


def notes(folder: Path, turns: int, size: int) -> None:
    rng = random.Random(size)
    for n in range(turns):
        (folder / f"note{n}.txt").write_text("".join(rng.choices(string.ascii_letters, k=size)))


def blob_bytes(run_id: str) -> int:
    folder = default_folder() / "default" / run_id
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


async def history_bytes(client: Client, run_id: str) -> int:
    return sum([e.ByteSize() async for e in client.get_workflow_handle(run_id).fetch_history_events()])


def whole_each_turn() -> Callable[[], None]:
    """The workflow as it was before conversations went by reference; returns the undo."""
    outgoing, keeps = threads.Threads.outgoing, threads.Threads.keeps
    threads.Threads.outgoing = lambda self, key, call: (call, lambda reply: None)  # type: ignore[method-assign]
    threads.Threads.keeps = lambda self: False  # type: ignore[method-assign]

    def undo() -> None:
        threads.Threads.outgoing, threads.Threads.keeps = outgoing, keeps  # type: ignore[method-assign]

    return undo


async def run_case(client: Client, llm: FakeOpenAI, case: Case, work: Path, uri: str) -> Case:
    llm.reply = reader(case.turns)
    run_id = f"loops-{case.way}-{case.turns}-{case.size}-{uuid.uuid4().hex[:6]}"
    began = time.perf_counter()
    if case.way == "raw":
        offered = builtin_specs(["Read"])
        inp = RawInput(uri=uri, turns=case.turns, workdir=str(work), offered=offered)
        said = await client.execute_workflow(RawLoop.run, inp, id=run_id, task_queue=QUEUE)
    else:
        spec = work / "reader.yaml"
        spec.write_text(SPEC.format(prompt=PROMPT, calls=case.turns + 1))
        plan = load(str(spec))
        undo = whole_each_turn() if case.way == "old" else (lambda: None)
        try:
            inp = RunInput(plan=plan, params={}, workdir=str(work), default_agent=uri, heartbeat_s=30)
            state = await client.execute_workflow("AgentRun", inp, id=run_id, task_queue=QUEUE, result_type=RunState)
        finally:
            undo()
        said = state.steps["read"]["output"] if state.status == "completed" else str(state.errors)
    case.ms_per_turn = (time.perf_counter() - began) / case.turns * 1000
    if said != f"read {case.turns}":
        raise RuntimeError(f"{case.way} {case.turns}: {said}")
    case.history, case.blobs = await history_bytes(client, run_id), blob_bytes(run_id)
    return case


def estimate(case: Case) -> Case:
    """A whole-conversation case not run: each turn sends the conversation so far (kept once, in
    history or the store), and each result is kept once more as its tool's result."""
    per_turn = case.size + 250  # a result and its call, as JSON
    case.blobs = sum(n * per_turn for n in range(case.turns))
    case.history = case.turns * (case.size + 3000)
    case.estimated = True
    return case


async def bench(turns: list[int], sizes: list[int], ways: list[str], model: str, cap_mb: float) -> None:
    uri = f"openai:{model}"
    env = await dev_server()
    rows: list[Case] = []
    async with env:
        worker = Worker(
            env.client,
            task_queue=QUEUE,
            workflows=[*WORKFLOWS, RawLoop],
            activities=ACTIVITIES,
            workflow_runner=runner(),
            max_concurrent_activities=100,
            graceful_shutdown_timeout=timedelta(seconds=10),
        )
        with FakeOpenAI(api_key="sk-bench") as llm, tempfile.TemporaryDirectory(prefix="agentrun-loops-") as tmp:
            os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"] = llm.url, "sk-bench"
            llm.requests = _Counted()
            async with worker:
                await run_case(env.client, llm, Case("new", 5, 1000), _work(Path(tmp), 5, 1000), uri)  # warm-up
                for size in sizes:
                    for n in turns:
                        work = _work(Path(tmp), n, size)
                        for way in ways:
                            case = Case(way, n, size)
                            quadratic = way != "new" and estimate(Case(way, n, size)).blobs > cap_mb * 1e6
                            rows.append(
                                estimate(case) if quadratic else await run_case(env.client, llm, case, work, uri)
                            )
                            print(rows[-1].row(), flush=True)
    print(f"\nmodel {model}")
    print("way  turns size      history       blobs  stored  above 2x/turn  ms/turn")
    for case in rows:
        print(case.row())
    for size in sizes:
        new = {c.turns: c for c in rows if c.way == "new" and c.size == size}
        if len(new) > 1:
            low, high = new[min(new)], new[max(new)]
            print(
                f"new, {size // 1000} KB: ms per turn at {high.turns} turns / at {low.turns}: "
                f"{high.ms_per_turn / low.ms_per_turn:.2f}"
            )


def _work(root: Path, turns: int, size: int) -> Path:
    work = root / f"{turns}-{size}"
    if not work.exists():
        work.mkdir()
        notes(work, turns, size)
    return work


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", default="10,100,500", help="loop lengths (default 10,100,500)")
    parser.add_argument("--sizes", default="5000,20000", help="bytes a tool returns (default 5000,20000)")
    parser.add_argument("--ways", default="new,old,raw", help="which ways to run (default new,old,raw)")
    parser.add_argument("--model", default="reader", help="the model's name (default reader: no known window)")
    parser.add_argument("--old-cap-mb", type=float, default=1000, help="largest old or raw case run (default 1000)")
    args = parser.parse_args()
    turns = [int(t) for t in args.turns.split(",")]
    sizes = [int(s) for s in args.sizes.split(",")]
    asyncio.run(bench(turns, sizes, args.ways.split(","), args.model, args.old_cap_mb))


if __name__ == "__main__":
    main()
