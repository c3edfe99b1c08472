"""kill -9 of the worker between tool calls: each tool call is an activity of its own, recorded in
history once it returns, so a new worker goes on from the calls already made and runs none of them
again. Counted by each call's side effect: a line appended to a file in the work directory."""

from __future__ import annotations

import json
import sys

from tests.conftest import ROOT, run_id, sigkill, start_worker, wait_for, watched_by_a_new_worker, write_spec
from tests.fakes.openai_server import FakeOpenAI, Messages, Reply, ToolUse

QUEUE = "tool-crash-tests"
CALLS = 5
SPEC = """
workflow:
  name: appender
  agents:
    appender:
      prompt: "Append five lines to calls.log with bash, one call per line."
      tools: [Bash]
  steps:
    - id: append
      agent: appender
"""


def appender(messages: Messages) -> Reply:
    """A model that makes CALLS bash calls, one a turn, each appending its own line, then stops."""
    made = sum(1 for m in messages if m["role"] == "tool")
    if made < CALLS:
        n = made + 1
        return ToolUse("bash", {"command": f'echo "call-{n} $AGENTRUN_IDEMPOTENCY_KEY" >> calls.log; echo ran-{n}'})
    return "appended"


def test_a_worker_killed_after_call_3_of_5_resumes_without_running_a_call_again(cli, address, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    spec = write_spec(tmp_path, SPEC)
    rid = run_id("tool-crash")
    with FakeOpenAI(appender, api_key="sk-test") as llm:
        env = {"OPENAI_BASE_URL": llm.url, "OPENAI_API_KEY": "sk-test"}
        after_third = llm.hold_prompt("ran-3")  # the model turn after call 3 waits for the kill
        first = start_worker(address, "--task-queue", QUEUE, env=env)
        try:
            started = cli(
                "start", str(spec), "--agent", "openai:appender", "--id", rid, "--task-queue", QUEUE,
                "--workdir", str(work), "--detach",
            )  # fmt: skip
            assert started.code == 0, started.err
            wait_for(lambda: llm.in_flight("appender") == 1)
            assert [line.split()[0] for line in (work / "calls.log").read_text().splitlines()] == [
                "call-1",
                "call-2",
                "call-3",
            ]
        finally:
            sigkill(first)
        after_third.set()  # the killed worker's request is abandoned; the next worker's goes through
        watched = watched_by_a_new_worker(cli, address, rid, "--task-queue", QUEUE, env=env)

    assert watched.code == 0, watched.out + watched.err
    lines = [line.split() for line in (work / "calls.log").read_text().splitlines()]
    assert [line[0] for line in lines] == [f"call-{n}" for n in range(1, CALLS + 1)]
    # Each call carried the step's idempotency key for its place in the step, the same on any retry.
    assert [line[1] for line in lines] == [f"{rid}/append/tool-{n}" for n in range(1, CALLS + 1)]
    status = json.loads(cli("status", rid, "--json").out)
    uses = status["tool_calls"]["append"]
    assert [u["outcome"] for u in uses] == ["ok"] * CALLS
    commands = [json.loads(u["arguments"])["command"] for u in uses]
    assert [c.split()[1].strip('"') for c in commands] == [f"call-{n}" for n in range(1, CALLS + 1)]
    assert watched.out.count("⚒ append: bash") == CALLS
    # `logs` reads each call and what it gave back from the run's history; `status` counts them.
    said = cli("logs", rid).out
    assert said.count("append ⚒ bash {") == CALLS and said.count("append ⚒ bash → ok in ") == CALLS
    assert [f"ran-{n}" in said for n in range(1, CALLS + 1)] == [True] * CALLS
    shown = cli("status", rid).out
    assert f"{CALLS} tool calls ({CALLS} ok); last: bash" in shown


# kill -9 of the worker inside a tool call: the call's activity heartbeats, so the server notices
# within seconds and the call runs again on the next worker, under the same idempotency key; the
# model reads that it ran again. A call whose every attempt's worker dies fails the step, naming it.

SLOW_SPEC = """
workflow:
  name: tally
  agents:
    tallier:
      prompt: "Tally once with the tool you have."
      tools: [{tools}]
  {servers}
  steps:
    - id: tally
      agent: tallier
"""
SLOW_BASH = "echo start-1 >> tally.txt; sleep 3; echo line-1 >> tally.txt"
RAN_AGAIN = "[ran again after the worker running it stopped; the first attempt may have partly run]"


def one_call(tool: str, arguments: dict):
    """A model that makes one tool call, then says what the call gave back."""

    def reply(messages: Messages) -> Reply:
        answers = [m["content"] for m in messages if m["role"] == "tool"]
        return f"answered: {answers[0]}" if answers else ToolUse(tool, arguments)

    return reply


def started_and_killed_inside(cli, address, llm, spec, work, tally, kills: int):
    """Start the run on a worker; each time a new attempt of the call has started (one more start
    line in the tally), kill -9 its worker and start another, `kills` times. Returns the run id
    and the last worker, serving the run."""
    env = {"OPENAI_BASE_URL": llm.url, "OPENAI_API_KEY": "sk-test"}
    rid = run_id("tool-crash-inside")
    worker = start_worker(address, "--task-queue", QUEUE, env=env)
    started = cli(
        "start", str(spec), "--agent", "openai:tallier", "--id", rid, "--task-queue", QUEUE,
        "--workdir", str(work), "--detach",
    )  # fmt: skip
    assert started.code == 0, started.err
    for n in range(1, kills + 1):
        wait_for(lambda n=n: _starts(tally) == n, timeout_s=60)
        sigkill(worker)
        worker = start_worker(address, "--task-queue", QUEUE, env=env)
    return rid, worker


def watched_after_kills(cli, address, llm, spec, work, tally, kills: int):
    """The run started and its worker killed inside the call `kills` times; then `watch` on the last
    worker until the run ends, and that worker stopped."""
    rid, worker = started_and_killed_inside(cli, address, llm, spec, work, tally, kills=kills)
    try:
        return rid, cli("watch", rid, timeout=90)
    finally:
        worker.terminate()
        worker.wait(timeout=30)


def _starts(tally) -> int:
    return sum(line.startswith("start-") for line in tally.read_text().splitlines()) if tally.exists() else 0


def test_a_worker_killed_inside_a_bash_call_runs_it_again_and_the_model_is_told(cli, address, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    spec = write_spec(tmp_path, SLOW_SPEC.format(tools="Bash", servers=""))
    with FakeOpenAI(one_call("bash", {"command": SLOW_BASH}), api_key="sk-test") as llm:
        rid, watched = watched_after_kills(cli, address, llm, spec, work, work / "tally.txt", kills=1)
        asked = [r.body["messages"] for r in llm.requests_for("tallier")]

    assert watched.code == 0, watched.out + watched.err
    # The first attempt died with its worker after its first line; the second ran the whole command.
    assert (work / "tally.txt").read_text().splitlines() == ["start-1", "start-1", "line-1"]
    told = [m["content"] for m in asked[-1] if m["role"] == "tool"]
    assert len(told) == 1 and told[0].startswith(RAN_AGAIN + "\n")
    assert '"exit_code": 0' in told[0]
    report = cli("report", rid).out
    assert "(ran again after its worker stopped: 2 attempts)" in report
    assert "- Ran again after a worker stopped (may have partly run twice): tally #1 bash" in report


def test_a_bash_call_whose_every_worker_dies_fails_the_step_naming_the_call(cli, address, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    spec = write_spec(tmp_path, SLOW_SPEC.format(tools="Bash", servers=""))
    with FakeOpenAI(one_call("bash", {"command": SLOW_BASH}), api_key="sk-test") as llm:
        # bash declares 2 attempts: both workers die inside the call.
        rid, watched = watched_after_kills(cli, address, llm, spec, work, work / "tally.txt", kills=2)
        turns = len(llm.requests_for("tallier"))

    assert watched.code != 0
    said = watched.out + watched.err
    assert "tool call 1 of the step, bash" in said and "could not be completed after 2 attempts" in said, said
    assert turns == 1  # the model was never handed a made-up result
    assert (work / "tally.txt").read_text().splitlines() == ["start-1", "start-1"]
    assert "- Could not be completed: tally #1 bash" in cli("report", rid).out


def test_a_worker_killed_inside_an_mcp_call_runs_it_again_and_the_model_is_told(cli, address, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    tally = tmp_path / "tally.txt"
    server = ROOT / "tests" / "fakes" / "mcp_server.py"
    servers = f"mcp_servers:\n    fake: {{command: {sys.executable}, args: [{server}], env: {{FAKE_MCP_COUNT_FILE: {tally}}}, allow_write: [{tmp_path}]}}"
    spec = write_spec(tmp_path, SLOW_SPEC.format(tools="mcp__fake__tally", servers=servers))
    with FakeOpenAI(one_call("mcp_fake_tally", {"note": "1", "seconds": 3}), api_key="sk-test") as llm:
        rid, watched = watched_after_kills(cli, address, llm, spec, work, tally, kills=1)
        asked = [r.body["messages"] for r in llm.requests_for("tallier")]

    assert watched.code == 0, watched.out + watched.err
    assert tally.read_text().splitlines().count("start-1") == 2 and "done-1" in tally.read_text()
    told = [m["content"] for m in asked[-1] if m["role"] == "tool"]
    assert told == [f"{RAN_AGAIN}\ntallied 1"]
