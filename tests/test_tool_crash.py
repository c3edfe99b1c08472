"""kill -9 of the worker between tool calls: each tool call is an activity of its own, recorded in
history once it returns, so a new worker goes on from the calls already made and runs none of them
again. Counted by each call's side effect: a line appended to a file in the work directory."""

from __future__ import annotations

import json

from tests.conftest import run_id, sigkill, start_worker, wait_for, watched_by_a_new_worker, write_spec
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
