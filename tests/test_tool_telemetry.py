"""OpenTelemetry of a run whose agent calls tools: one `execute_tool <tool>` span per call, in the
GenAI semantic conventions, under the step's span, exported by a real `python -m worker` to an
OTLP/HTTP receiver on loopback."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from tests.conftest import run_id, start_worker, write_spec
from tests.fakes.openai_server import FakeOpenAI, ToolUse
from tests.fakes.otlp_receiver import OtlpReceiver
from tests.test_telemetry import API_KEY, client_start, one, otel_env, started, stop, tree

SPEC = """
workflow:
  name: toolspans
  agents:
    w: {prompt: "Write a.txt, then read it back.", tools: [Write, Read]}
  steps:
    - id: write
      agent: w
"""


@pytest.fixture
def spawned() -> Iterator[list[subprocess.Popen]]:
    """Processes a test starts; any still running when it ends (a failed assertion) is killed."""
    started: list[subprocess.Popen] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


async def test_one_execute_tool_span_per_call(client, address, tmp_path, spawned):
    queue, rid = f"otel-{run_id()}", run_id("toolspans")
    spec = write_spec(tmp_path, SPEC)
    replies = [ToolUse("write", {"path": "a.txt", "content": "tide"}), ToolUse("read", {"path": "a.txt"}), "tide"]
    with OtlpReceiver() as otlp, FakeOpenAI(replies, api_key=API_KEY) as llm:
        env = otel_env(otlp, llm)
        worker = start_worker(address, "--task-queue", queue, env=env)
        starter = client_start(address, spec, rid, queue, env, "openai:w")
        spawned += [worker, starter]
        await started(client, rid, starter)
        out, err = starter.communicate(timeout=60)
        assert starter.returncode == 0, out + err
        stop(worker)
        asked = [c for m in llm.requests[-1].body["messages"] for c in m.get("tool_calls") or []]

    spans = otlp.spans()
    task = one(spans, "task write")
    tools = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "execute_tool"]
    assert [s.name for s in sorted(tools, key=lambda s: s.start_ns)] == ["execute_tool write", "execute_tool read"]
    for span, call in zip(sorted(tools, key=lambda s: s.start_ns), asked, strict=True):
        assert span.parent_id == task.span_id, tree(spans)
        assert span.attributes == span.attributes | {
            "gen_ai.tool.name": call["function"]["name"],
            "gen_ai.tool.call.id": call["id"],
            "gen_ai.tool.type": "function",
            "agentrun.node.key": "write",
            "agentrun.outcome": "ok",
        }
