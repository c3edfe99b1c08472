"""Traces, metrics and JSON logs of real runs: a `python -m worker` and `python -m client` with the
standard OTEL_* variables, exporting to an OTLP/HTTP receiver on loopback that decodes what it gets.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError

from agentrun.worker.telemetry import Settings, TelemetryError, settings
from tests.conftest import ROOT, run_id, start_worker, write_spec
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.otlp_receiver import OtlpReceiver, Span
from tests.runs import answer, open_gate

API_KEY = "sk-canary-9f3e7d1c5b2a"  # the agents' key: no exported byte may hold it
COLLECTOR_KEY = "hdr-canary-4b8e2f6a"  # the collector's, sent as a header and nowhere else

PIPELINE = """
workflow:
  name: traced
  prices:
    a: {input: 1.5, output: 6}
  agents:
    a: {prompt: "Score the lead from angle A."}
    b: {prompt: "Score the lead from angle B."}
    w: {prompt: "Write the summary."}
  steps:
    - id: fan
      type: parallel
      parallel:
        - {agent: a, output_key: ka}
        - {agent: b, output_key: kb}
    - id: write
      agent: w
      approval: {prompt: "Write it up?"}
"""


@pytest.fixture
def spawned():
    """Processes a test starts; any still running when it ends (a failed assertion) is killed."""
    started: list[subprocess.Popen] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def otel_env(otlp: OtlpReceiver, llm: FakeOpenAI, **more: str) -> dict[str, str]:
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": otlp.url,
        "OTEL_EXPORTER_OTLP_HEADERS": f"x-collector-key={COLLECTOR_KEY}",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
        "OPENAI_BASE_URL": llm.url,
        "OPENAI_API_KEY": API_KEY,
        "AGENTRUN_TRACE_CONTENT": "",
        **more,
    }


def client_start(address: str, spec: Path, rid: str, queue: str, env: dict[str, str], *agents: str):
    environ = {**_environ(), "TEMPORAL_ADDRESS": address, **env}
    argv = [sys.executable, "-m", "agentrun.client", "start", str(spec), "--id", rid, "--task-queue", queue]
    for agent in agents:
        argv += ["--agent", agent]
    return subprocess.Popen(argv, env=environ, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


async def started(client: Client, rid: str, starter: subprocess.Popen) -> WorkflowHandle:
    """The run `client start` (another process) is starting, once it is there."""
    handle = client.get_workflow_handle(rid)
    for _ in range(300):
        assert starter.poll() is None, starter.communicate()
        try:
            await handle.describe()
            return handle
        except RPCError:
            await asyncio.sleep(0.1)
    raise AssertionError(f"run {rid} never started")


async def scrape(port: int, awaited: str) -> str:
    """The worker's Prometheus page, once it shows `awaited` (the SDK's metrics are drained each second)."""
    for _ in range(100):
        page = await asyncio.to_thread(
            lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
        )
        if awaited in page.decode():
            return page.decode()
        await asyncio.sleep(0.1)
    raise AssertionError(f"{awaited} never showed on the metrics page")


def _environ() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("OTEL_") and k != "TEMPORAL_PROFILE"}


def stop(worker: subprocess.Popen) -> str:
    worker.send_signal(signal.SIGTERM)
    out, _ = worker.communicate(timeout=60)
    assert worker.returncode == 0
    return out.decode()


def tree(spans: list[Span]) -> str:
    """The spans as an indented tree, for a failing assertion to show."""
    children: dict[str, list[Span]] = {}
    for s in spans:
        children.setdefault(s.parent_id, []).append(s)
    lines: list[str] = []

    def walk(parent: str, depth: int) -> None:
        for s in sorted(children.get(parent, []), key=lambda s: s.start_ns):
            lines.append(f"{'  ' * depth}{s.name} [{s.service} {s.status}]")
            walk(s.span_id, depth + 1)

    walk("", 0)
    return "\n".join(lines)


def one(spans: list[Span], name: str) -> Span:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, f"{len(found)} spans named {name!r}:\n{tree(spans)}"
    return found[0]


async def test_a_run_is_one_trace_with_genai_spans_and_metrics(client, address, tmp_path, spawned):
    queue, rid = f"otel-{run_id()}", run_id("traced")
    spec = write_spec(tmp_path, PIPELINE)
    with OtlpReceiver() as otlp, FakeOpenAI(api_key=API_KEY, by_model={"a": "A: 7", "b": "B: 5", "w": "done"}) as llm:
        env = otel_env(otlp, llm)
        worker = start_worker(address, "--task-queue", queue, env=env)
        llm.fail_next(1, 503)  # one branch's first request: the activity retries it
        starter = client_start(address, spec, rid, queue, env, "openai:w", "a=openai:a", "b=openai:b")
        spawned += [worker, starter]
        handle = await started(client, rid, starter)
        await open_gate(handle, "write")
        await answer(handle, "write", "approve")
        out, err = starter.communicate(timeout=60)
        assert starter.returncode == 0, out + err
        stop(worker)

    spans = otlp.spans()
    start = one(spans, "start traced")
    run = [s for s in spans if s.trace_id == start.trace_id]
    assert len(run) == len(spans), f"spans outside the run's trace:\n{tree(spans)}"
    by_id = {s.span_id: s for s in run}
    assert len(by_id) == len(run) and all(s.parent_id in by_id for s in run if s is not start), tree(run)

    def parent(s: Span) -> Span:
        return by_id[s.parent_id]

    workflow = one(run, "invoke_workflow traced")
    assert (start.service, start.kind, workflow.service) == ("agentrun-client", "CLIENT", "agentrun-worker")
    assert parent(workflow) is start and workflow.attributes["agentrun.status"] == "completed"
    fan = one(run, "parallel fan")
    assert parent(parent(fan)) is workflow
    for model, branch in (("a", "fan.ka"), ("b", "fan.kb"), ("w", "write")):
        task, call = one(run, f"task {branch}"), one(run, f"chat {model}")
        assert parent(call) is task and call.kind == "CLIENT"
        reported = [r.reported for r in llm.requests_for(model) if r.reported]
        assert len(reported) == 1
        assert call.attributes == call.attributes | {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": model,
            "gen_ai.response.model": model,
            "gen_ai.usage.input_tokens": reported[0][0],
            "gen_ai.usage.output_tokens": reported[0][1],
            "agentrun.run_id": rid,
            "agentrun.node.key": branch,
            "agentrun.outcome": "completed",
        }
        attempts = sorted((s for s in run if s.parent_id == call.span_id), key=lambda s: s.start_ns)
        assert [s.name for s in attempts] == ["run_agent"] * len(attempts)
        assert call.attributes["agentrun.attempt"] == len(attempts)
        # The attempt that answered streamed it: the first token is an event, its time an attribute.
        assert "agentrun.first_token" in attempts[-1].events
        assert attempts[-1].attributes["gen_ai.response.time_to_first_chunk"] > 0
    assert one(run, "task fan.ka").parent_id == fan.span_id == one(run, "task fan.kb").parent_id
    a_in, a_out = next(r.reported for r in llm.requests_for("a") if r.reported)
    assert one(run, "chat a").attributes["agentrun.cost_usd"] == pytest.approx((a_in * 1.5 + a_out * 6) / 1e6)

    # The 503: a failed attempt and the one that answered, both under the call that was retried.
    retried = [s for s in run if s.name == "run_agent" and s.status == "ERROR"]
    assert len(retried) == 1 and retried[0].attributes["error.type"] == "AgentUnavailable", tree(run)
    assert retried[0].attributes["agentrun.attempt"] == 1 and "HTTP 503" in retried[0].description
    gate = one(run, "gate write")
    assert parent(gate) is one(run, "task write") and gate.attributes["agentrun.outcome"] == "approved"

    # No prompt or reply text without AGENTRUN_TRACE_CONTENT=1, and no secret anywhere.
    assert not any("gen_ai.input.messages" in s.attributes or "gen_ai.output.messages" in s.attributes for s in run)
    everything = b"".join(otlp.bodies)
    assert b"angle A" not in everything and API_KEY.encode() not in everything
    assert COLLECTOR_KEY.encode() not in everything
    assert {h.get("x-collector-key") for h in otlp.headers} == {COLLECTOR_KEY}

    metrics = otlp.metrics()

    def total(name: str, service: str = "agentrun-worker", **attributes: str) -> float:
        points = [p for p in metrics.get(name, []) if p.service == service]
        return sum(p.value for p in points if p.attributes.items() >= attributes.items())

    tokens = {m: next(r.reported for r in llm.requests_for(m) if r.reported) for m in "abw"}
    assert total("agentrun.prompts") == 3
    for model, (given, taken) in tokens.items():
        assert total("agentrun.tokens", **{"gen_ai.request.model": model, "gen_ai.token.type": "input"}) == given
        assert total("agentrun.tokens", **{"gen_ai.request.model": model, "gen_ai.token.type": "output"}) == taken
    assert total("agentrun.cost_usd", **{"gen_ai.request.model": "a"}) == pytest.approx((a_in * 1.5 + a_out * 6) / 1e6)
    assert total("agentrun.retries", **{"agentrun.retry.kind": "transport"}) == 1
    assert total("agentrun.failures", **{"agentrun.failure.kind": "transport"}) == 1
    assert total("agentrun.runs", **{"agentrun.status": "completed"}) == 1
    waits = [p for p in metrics["agentrun.gate.wait"] if p.attributes["agentrun.outcome"] == "approved"]
    assert sum(p.count for p in waits) == 1
    durations = metrics["gen_ai.client.operation.duration"]
    assert sum(p.count for p in durations) == 4
    assert sum(p.count for p in durations if p.attributes.get("error.type") == "AgentUnavailable") == 1
    # The Temporal SDK's own, from the worker's runtime.
    assert total("temporal_workflow_completed") >= 1 and "temporal_activity_execution_latency" in metrics


async def test_content_prometheus_json_logs_and_a_trace_carried_across_workers(client, address, tmp_path, spawned):
    """A worker that logs JSON, serves Prometheus and records content stops while the run waits on
    a person; the next one replays the run and finishes it: still one trace, nothing twice."""
    queue, rid = f"otel-{run_id()}", run_id("carried")
    spec = write_spec(
        tmp_path,
        "name: carried\nsubtasks:\n  draft: {instructions: Draft the notes.}\n"
        '  ok: {human: {prompt: "Ship it?"}}\n  final: {instructions: Ship it.}\n',
    )
    port = _free_port()
    reply = "Notes drafted.\nCOMPLETION_STATUS: COMPLETE"
    with OtlpReceiver() as otlp, FakeOpenAI(reply, api_key=API_KEY) as llm:
        env = otel_env(otlp, llm, AGENTRUN_TRACE_CONTENT="1")
        first = start_worker(
            address, "--task-queue", queue, "--metrics-port", str(port), "--log-format", "json", env=env
        )
        starter = client_start(address, spec, rid, queue, env, "openai:m")
        spawned += [first, starter]
        handle = await started(client, rid, starter)
        await open_gate(handle, "ok")
        scraped = await scrape(port, "temporal_worker_start_total{")
        logged = stop(first)
        second = start_worker(address, "--task-queue", queue, env=env)
        spawned.append(second)
        await answer(handle, "ok", "yes")
        out, err = starter.communicate(timeout=60)
        assert starter.returncode == 0, out + err
        stop(second)

    prompts = [line for line in scraped.splitlines() if line.startswith("agentrun_prompts_total{")]
    assert len(prompts) == 1 and 'agentrun_agent="default"' in prompts[0] and prompts[0].endswith(" 1.0")
    assert "gen_ai_client_operation_duration_seconds_count{" in scraped and "temporal_worker_start_total{" in scraped

    spans = otlp.spans()
    assert len({s.trace_id for s in spans}) == 1, tree(spans)
    ids = Counter(s.span_id for s in spans)
    assert max(ids.values()) == 1 and all(not s.parent_id or s.parent_id in ids for s in spans), tree(spans)
    one(spans, "invoke_workflow carried")
    assert one(spans, "gate ok").attributes["agentrun.outcome"] == "answered"
    draft = next(s for s in spans if s.name == "chat m" and s.attributes["agentrun.node.key"] == "draft")
    sent = json.loads(draft.attributes["gen_ai.input.messages"])
    assert sent[-1]["role"] == "user" and "Draft the notes." in sent[-1]["parts"][0]["content"]
    assert json.loads(draft.attributes["gen_ai.output.messages"])[0]["parts"][0]["content"] == reply
    assert API_KEY.encode() not in b"".join(otlp.bodies)

    lines = [json.loads(line) for line in logged.splitlines()]
    events = {(line.get("event"), line.get("node_id")) for line in lines if line.get("run_id") == rid}
    assert {("run.started", None), ("node.ended", "draft"), ("agent.replied", "draft"), ("gate.opened", "ok")} <= events
    replied = next(line for line in lines if line.get("event") == "agent.replied")
    assert replied["trace_id"] == spans[0].trace_id and replied["model"] == "m"


def test_no_variable_no_telemetry_and_mistakes_are_one_line():
    assert settings({}) == Settings() and not settings({}).on
    assert settings({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}).traces == ("otlp",)
    chosen = settings({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_METRICS_EXPORTER": "none"})
    assert chosen.traces == ("otlp",) and chosen.metrics == ()
    assert settings({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "console"}) == Settings()
    assert settings({}, metrics_port=9000).prometheus == ("127.0.0.1", 9000)  # loopback unless told
    assert settings({}, metrics_port=9000, metrics_host="0.0.0.0").prometheus == ("0.0.0.0", 9000)
    assert settings({"OTEL_METRICS_EXPORTER": "prometheus"}).prometheus == ("localhost", 9464)
    assert settings({"OTEL_METRICS_EXPORTER": "prometheus"}, serves=False) == Settings()  # a CLI command
    with pytest.raises(TelemetryError, match="OTEL_EXPORTER_OTLP_PROTOCOL=http/json: OTLP goes out as"):
        settings({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})
    done = subprocess.run(
        [sys.executable, "-m", "agentrun.worker"],
        env={**_environ(), "OTEL_TRACES_EXPORTER": "zipkin", "TEMPORAL_ADDRESS": "127.0.0.1:1"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr == "error: OTEL_TRACES_EXPORTER=zipkin: unknown exporter 'zipkin'; use otlp, console or none\n"


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
