"""Task-tree semantics through the real workflow, a real dev server and real agents on loopback."""

from __future__ import annotations

import json
import sys

import pytest

from tests.conftest import ROOT, write_spec
from tests.fakes.agentapi_server import FakeAgentAPI
from tests.fakes.openai_server import FakeOpenAI
from tests.runs import SHELL_BRAIN, run_spec, sh

pytestmark = pytest.mark.usefixtures("worker")


@pytest.fixture
def agentapi(tmp_path):
    with FakeAgentAPI(command=SHELL_BRAIN, busy_s=0.1, cwd=str(tmp_path)) as server:
        yield server


async def test_prompts_go_depth_first_with_system_and_completion_instruction(client, tmp_path, agentapi):
    spec = write_spec(
        tmp_path,
        f"""
name: order
system_instructions: "You are terse."
subtasks:
  A:
    instructions: {sh("echo did-A")}
    subtasks:
      B:
        instructions: {sh("echo did-B")}
        system_instructions: "You are careful."
        subtasks:
          D: {{instructions: "{{{{ greeting }}}} D ```sh\\necho did-D\\n```"}}
      C:
        subtasks:
          F: {{instructions: {sh("echo did-F")}}}
params:
  greeting: {{range: string, default: hello}}
""",
    )
    state = await run_spec(client, spec, f"agentapi:{agentapi.url}")
    assert state.status == "completed"
    order = [next(w for w in ("did-A", "did-B", "did-D", "did-F") if w in p) for p in agentapi.received]
    assert order == ["did-A", "did-B", "did-D", "did-F"]
    first, _, third, fourth = agentapi.received
    assert first.startswith("You are terse.\n\nStep.")
    assert first.endswith("(or `COMPLETION_STATUS: ERROR` if you could not do the task).")
    assert third.startswith("You are careful.\n\nhello D")
    assert fourth.startswith("You are terse.")
    assert state.outputs["A.B"].startswith("did-B") and [t.status for t in state.tasks.values()] == ["completed"] * 4
    # A task with work and subtasks is visited as the two it is: "A.*" (it and its subtasks), then "A".
    assert state.visited_nodes == ["order", "A.*", "A", "A.B.*", "A.B", "A.B.D", "A.C", "A.C.F"]


async def test_error_status_fails_the_run_and_later_tasks_never_run(client, tmp_path, agentapi):
    spec = write_spec(
        tmp_path,
        f"""
subtasks:
  one: {{instructions: {sh("echo fine")}}}
  two: {{instructions: {sh("echo broken >&2; exit 3")}}}
  three: {{instructions: {sh("echo never")}}}
""",
    )
    state = await run_spec(client, spec, f"agentapi:{agentapi.url}")
    assert state.status == "failed"
    assert [t.status for t in state.tasks.values()] == ["completed", "failed", "pending"]
    assert "COMPLETION_STATUS: ERROR" in state.tasks["two"].error and "broken" in state.tasks["two"].error
    assert len(agentapi.received) == 2


SILENT_THEN_OK = "command:sh -c 'if grep -q \"without a completion status\"; then echo COMPLETION_STATUS: COMPLETE; else echo thinking; fi'"


async def test_silent_agent_gets_one_nudge(client, tmp_path):
    spec = write_spec(tmp_path, "subtasks:\n  t: {instructions: do it}\n")
    state = await run_spec(client, spec, SILENT_THEN_OK)
    # The output is the reply without the protocol's status line: nothing is left of this one.
    assert state.status == "completed" and state.outputs["t"] == ""


async def test_agent_silent_after_the_nudge_fails_unless_lenient(client, tmp_path):
    spec = write_spec(tmp_path, "subtasks:\n  t: {instructions: do it}\n")
    never = "command:sh -c 'cat >/dev/null; echo thinking'"
    state = await run_spec(client, spec, never)
    assert state.status == "failed" and "even after a reminder" in state.tasks["t"].error
    lenient = await run_spec(client, spec, never, lenient=True)
    assert lenient.status == "completed" and lenient.outputs["t"].strip() == "thinking"


async def test_loop_until_status_counts_iterations_and_passes_the_message(client, tmp_path, agentapi):
    block = (
        "n=$(cat n 2>/dev/null || echo 0); n=$((n+1)); echo $n > n; "
        "if [ $n -ge 3 ]; then echo COMPLETION_STATUS: DONE; else echo COMPLETION_STATUS: CONTINUE; fi"
    )
    spec = write_spec(
        tmp_path,
        f"""
subtasks:
  research:
    instructions: "Round {{{{ iteration }}}}\\n```sh\\n{block}\\n```"
    loop_until: {{status: DONE, message: "Say DONE when exhausted."}}
""",
    )
    state = await run_spec(client, spec, f"agentapi:{agentapi.url}")
    assert state.status == "completed" and state.tasks["research"].iterations == 3
    assert [p.split("\n")[0] for p in agentapi.received] == ["Round 1", "Round 2", "Round 3"]
    assert "Say DONE when exhausted." in agentapi.received[0]


async def test_loop_ends_on_the_bare_word_and_warns_at_the_limit(client, tmp_path):
    replies = tmp_path / "replies.yaml"
    replies.write_text(
        "tasks:\n  a: ['COMPLETION_STATUS: CONTINUE', 'I am done now']\n  b: 'COMPLETION_STATUS: CONTINUE'\n"
    )
    spec = write_spec(
        tmp_path,
        """
subtasks:
  a: {instructions: go, loop_until: {status: done, message: m}}
  b: {instructions: go, loop_until: {status: DONE, message: m, max_iterations: 3}}
""",
    )
    state = await run_spec(client, spec, f"scripted:{replies}")
    assert state.status == "completed"
    assert state.tasks["a"].iterations == 2 and state.tasks["b"].iterations == 3
    assert any("b: stopped after 3 iterations" in w for w in state.warnings)


CRITERIA = """
subtasks:
  make:
    instructions: {block}
    success_criteria:
      python: |
        import os
        result = os.path.exists("{{{{ target }}}}")
        if not result:
            error_message = "{{{{ target }}}} is missing"
      max_retries: {retries}
      retry_message: "Last time: {{{{ error }}}}. Fix it."
params:
  target: {{range: string, default: out.txt}}
"""


async def test_success_criteria_retry_with_the_real_error(client, tmp_path, agentapi):
    block = sh("if [ -f tried ]; then echo ok > out.txt; fi; touch tried; echo attempt")
    state = await run_spec(
        client, write_spec(tmp_path, CRITERIA.format(block=block, retries=1)), f"agentapi:{agentapi.url}"
    )
    assert state.status == "completed" and state.tasks["make"].attempts == 2
    assert "Last time: out.txt is missing. Fix it.\n\nStep." in agentapi.received[1]
    assert "Last time" not in agentapi.received[0]


async def test_success_criteria_exhausted_fails_with_the_reason(client, tmp_path, agentapi):
    block = sh("echo nothing written")
    state = await run_spec(
        client, write_spec(tmp_path, CRITERIA.format(block=block, retries=2)), f"agentapi:{agentapi.url}"
    )
    assert state.status == "failed" and state.tasks["make"].attempts == 3 and len(agentapi.received) == 3
    assert "after 3 attempt(s): out.txt is missing" in state.tasks["make"].error


async def test_provider_call_renders_params_and_writes_the_output_file(client, tmp_path):
    spec = write_spec(
        tmp_path,
        """
params: {who: {range: string}}
subtasks:
  greet:
    provider_call:
      provider: shell
      method: run
      params: {command: "echo hello {{ who }}"}
      output_file: out/greeting.txt
""",
    )
    state = await run_spec(client, spec, "scripted:none.yaml", params={"who": "world"})
    assert state.status == "completed" and state.outputs["greet"] == "hello world\n"
    assert (tmp_path / "out" / "greeting.txt").read_text() == "hello world\n"


async def test_preconditions_stop_a_task_before_its_agent_is_called(client, tmp_path, agentapi):
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "seed.txt").write_text("seed")
    work = tmp_path / "work"
    work.mkdir()
    spec = write_spec(
        tmp_path,
        f"""
subtasks:
  copy:
    instructions: {sh("cat templates/seed.txt")}
    preconditions:
      sync_targets: {{paths: [templates]}}
      files_exist: {{patterns: ["templates/*.txt"]}}
  needs_two:
    instructions: {sh("echo never")}
    preconditions:
      files_exist: {{patterns: ["templates/*.txt"], min_count: 2}}
""",
    )
    state = await run_spec(client, spec, f"agentapi:{agentapi.url}", workdir=work)
    assert (work / "templates" / "seed.txt").read_text() == "seed"
    assert state.tasks["copy"].status == "completed" and state.tasks["needs_two"].status == "failed"
    assert "precondition failed" in state.tasks["needs_two"].error and len(agentapi.received) == 1


async def test_resume_from_skips_earlier_tasks(client, tmp_path, agentapi):
    spec = write_spec(
        tmp_path,
        f"""
subtasks:
  a: {{instructions: {sh("echo a")}}}
  b: {{subtasks: {{c: {{instructions: {sh("echo c")}}}}}}}
  d: {{instructions: {sh("echo d")}}}
""",
    )
    state = await run_spec(client, spec, f"agentapi:{agentapi.url}", resume_from="b.c")
    assert [t.status for t in state.tasks.values()] == ["skipped", "completed", "completed"]
    assert len(agentapi.received) == 2 and "echo c" in agentapi.received[0]


async def test_openai_reuse_carries_the_transcript_and_counts_tokens(client, tmp_path, monkeypatch):
    with FakeOpenAI(
        reply=["first answer COMPLETION_STATUS: COMPLETE", "second answer COMPLETION_STATUS: COMPLETE"],
        api_key="sk-test",
    ) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        spec = write_spec(tmp_path, "subtasks:\n  one: {instructions: first}\n  two: {instructions: second}\n")
        state = await run_spec(client, spec, "openai:test-model")
        second = server.requests[1].body["messages"]
    assert state.status == "completed"
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert second[1]["content"].startswith("first answer") and second[2]["content"].startswith("second")
    assert state.usage.input_tokens > 0 and state.tasks["two"].usage.output_tokens > 0


async def test_refresh_lifecycle_sends_no_transcript(client, tmp_path, monkeypatch):
    with FakeOpenAI(reply="ok COMPLETION_STATUS: COMPLETE") as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        spec = write_spec(
            tmp_path, "agent_lifecycle: refresh\nsubtasks:\n  one: {instructions: a}\n  two: {instructions: b}\n"
        )
        state = await run_spec(client, spec, "openai:m")
        assert state.status == "completed" and len(server.requests[1].body["messages"]) == 1


async def test_each_agent_id_reaches_its_own_agent(client, tmp_path, agentapi):
    with FakeAgentAPI(command=SHELL_BRAIN, busy_s=0.1, cwd=str(tmp_path)) as reviewer:
        spec = write_spec(
            tmp_path,
            f"""
subtasks:
  write: {{instructions: {sh("echo draft")}}}
  review: {{instructions: {sh("echo lgtm")}, agent: reviewer}}
""",
        )
        state = await run_spec(
            client, spec, f"agentapi:{agentapi.url}", agents={"reviewer": f"agentapi:{reviewer.url}"}
        )
        assert state.status == "completed"
        assert len(agentapi.received) == 1 and len(reviewer.received) == 1 and "lgtm" in reviewer.received[0]


async def test_refresh_gives_each_task_a_fresh_agentapi_server(client, tmp_path, monkeypatch, agentapi_bin):
    log = agentapi_bin
    monkeypatch.setenv("FAKE_AGENTAPI_STARTUP_S", "0.3")  # the fake's own default, as this test always ran
    monkeypatch.setenv("FAKE_AGENTAPI_BUSY_S", "0.1")
    block = (
        "n=$(cat n 2>/dev/null || echo 0); n=$((n+1)); echo $n > n; "
        "if [ $n -ge 2 ]; then echo COMPLETION_STATUS: DONE; else echo COMPLETION_STATUS: CONTINUE; fi"
    )
    spec = write_spec(
        tmp_path,
        f"""
agent_lifecycle: refresh
subtasks:
  loop: {{instructions: "```sh\\n{block}\\n```", loop_until: {{status: DONE, message: m}}}}
  after: {{instructions: {sh("echo after")}}}
""",
    )
    uri = f"agentapi:http://127.0.0.1:0?type=claude&cmd={sys.executable}+{ROOT / 'examples/agents/shell_agent.py'}"
    state = await run_spec(client, spec, uri)
    assert state.status == "completed" and state.tasks["loop"].iterations == 2
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["event"] for e in events] == ["start", "message", "message", "stop", "start", "message", "stop"]
    assert len({e["pid"] for e in events if e["event"] == "start"}) == 2
