"""Large values go by reference: an agent's 10 MB reply, too big for Temporal's history, is stored
outside it — in a folder beside the state by default, in an S3 bucket when AGENTRUN_BLOB_URL names
one — and history keeps a small reference that says where the value is and how big it is. The next
step's prompt, `status`, `report` and `logs` get the whole value back. A map's collected results and
a provider's result go the same way; a small value stays inline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
from moto.server import ThreadedMotoServer
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client
from temporalio.worker import Replayer

from agentrun.worker import blobs
from agentrun.worker.build import WORKFLOWS, runner
from agentrun.workflows import sizes
from tests.conftest import ROOT, run_id, until, write_spec
from tests.runs import run_spec

SPEC = """\
workflow:
  name: big
  agents:
    writer: {prompt: "Write the long report."}
    reader: {prompt: "Summarise this report."}
  steps:
    - id: write
      agent: writer
    - id: read
      agent: reader
      input: "{{steps.write.output}}"
"""
AGENTS = ("--agent", "writer=openai:writer", "--agent", "reader=openai:reader")
BIG = "".join(f"line {i:07d} of the long report\n" for i in range(350_000))  # 11.2 MB
REFERENCE = b"temporal.api.sdk.v1.ExternalStorageReference"
SCHEDULED = EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
DEFAULT_FOLDER = {blobs.URL_ENV: ""}  # not the session's folder: the default one, beside the state


async def history(client: Client, rid: str) -> list[HistoryEvent]:
    return [event async for event in client.get_workflow_handle(rid).fetch_history_events()]


def results(events: list[HistoryEvent]) -> list[Payload]:
    """What each activity handed back, in order, as history holds it."""
    return [
        e.activity_task_completed_event_attributes.result.payloads[0]
        for e in events
        if e.HasField("activity_task_completed_event_attributes")
    ]


def placeholder(payload: Payload) -> dict:
    """What Temporal Web shows of a stored value: its reference, with the size in a field of its own."""
    assert payload.metadata["messageType"] == REFERENCE
    shown = json.loads(payload.data)
    size = payload.external_payloads[0].size_bytes
    assert shown["claimData"]["size"] == f"{size / 1_000_000:.1f} MB ({size} bytes)"
    return shown


async def test_a_10_mb_reply_goes_by_reference_to_the_next_step_status_report_and_logs(
    cli, cli_process, client, llm, tmp_path
):
    llm.by_model.update({"writer": BIG, "reader": "a short summary"})
    held = llm.hold("reader")
    spec, rid = write_spec(tmp_path, SPEC), run_id("big")
    started = cli_process(
        "start", str(spec), *AGENTS, "--task-queue", run_id("q-big"), "--id", rid, extra_env=DEFAULT_FOLDER
    )
    await until(lambda: llm.in_flight("reader") == 1, timeout_s=120)
    running = json.loads(cli("status", rid, "--json", extra_env=DEFAULT_FOLDER).out)  # the worker's answer
    assert running["status"] == "running" and running["steps"]["write"]["output"] == BIG
    held.set()
    out, err = started.communicate(timeout=120)
    assert started.returncode == 0, out + err

    assert llm.prompts_for("reader") == [f"Summarise this report.\n\nInput:\n{BIG.rstrip()}"]  # whole, not cut
    ended = json.loads(cli("status", rid, "--json", extra_env=DEFAULT_FOLDER).out)  # from the memo
    assert ended["status"] == "completed" and ended["steps"]["write"]["output"] == BIG
    report = cli("report", rid, "--outputs", extra_env=DEFAULT_FOLDER).out
    assert (
        f"```\n{BIG[:64_000].rstrip()}\n```\n\n(its first 64,000 characters of 11.2 MB; `logs {rid} --task write`"
        in report
    )
    assert f"(reply)\n{BIG}" in cli("logs", rid, "--task", "write", extra_env=DEFAULT_FOLDER).out

    events = await history(client, rid)
    assert max(e.ByteSize() for e in events) < 10_000  # the reply, prompt, memo and result are references
    write, read = results(events)
    shown = placeholder(write)
    assert shown["driverName"] == "agentrun.folder"
    stored = Path(shown["claimData"]["file"])
    assert stored.parent == tmp_path / "state" / "blobs" / "default" / rid
    assert stored.stat().st_size == write.external_payloads[0].size_bytes > len(BIG)
    assert json.loads(read.data)["text"] == "a short summary"  # a small value stays inline


@pytest.fixture
def s3(tmp_path):
    """A real S3 HTTP server on loopback (moto's), with a bucket, and the AWS settings to reach it."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    settings = {
        "AWS_ENDPOINT_URL": f"http://{host}:{port}",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(tmp_path / "no-aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-aws-credentials"),
    }
    bucket = boto3.client(
        "s3",
        endpoint_url=settings["AWS_ENDPOINT_URL"],
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )
    bucket.create_bucket(Bucket="agentrun-test")
    yield bucket, settings
    server.stop()


async def test_with_an_s3_url_large_values_go_to_the_bucket(cli, client, llm, tmp_path, s3):
    bucket, settings = s3
    env = {**settings, blobs.URL_ENV: "s3://agentrun-test/runs"}
    llm.by_model.update({"writer": BIG, "reader": "a short summary"})
    spec, rid = write_spec(tmp_path, SPEC), run_id("big-s3")
    ran = cli("start", str(spec), *AGENTS, "--task-queue", run_id("q-s3"), "--id", rid, extra_env=env)
    assert ran.code == 0, ran.out + ran.err
    assert llm.prompts_for("reader") == [f"Summarise this report.\n\nInput:\n{BIG.rstrip()}"]
    assert json.loads(cli("status", rid, "--json", extra_env=env).out)["steps"]["write"]["output"] == BIG

    events = await history(client, rid)
    assert max(e.ByteSize() for e in events) < 10_000
    shown = placeholder(results(events)[0])
    key = shown["claimData"]["key"]
    assert shown["driverName"] == "aws.s3driver" and shown["claimData"]["url"] == f"s3://agentrun-test/{key}"
    assert key.startswith(f"runs/v0/ns/default/wt/AgentRun/wi/{rid}/")
    kept = [o["Key"] for o in bucket.list_objects_v2(Bucket="agentrun-test", Prefix="runs/")["Contents"]]
    assert key in kept and not (tmp_path / "state" / "blobs").exists()

    unset = cli("status", rid, "--json", extra_env=DEFAULT_FOLDER)  # a client not told where they are
    assert unset.code == 3 and unset.out == ""
    assert unset.err.startswith(f"error: the large value s3://agentrun-test/runs/v0/ns/default/wt/AgentRun/wi/{rid}/")
    assert " is in S3, and AGENTRUN_BLOB_URL names no bucket here\n  hint: set AGENTRUN_BLOB_URL=s3://" in unset.err


async def test_the_threshold_is_configurable_and_a_missing_value_is_named(cli, client, llm, tmp_path):
    env = {**DEFAULT_FOLDER, blobs.THRESHOLD_ENV: "4096"}
    llm.by_model.update({"writer": "notes " * 1000, "reader": "a short summary"})
    spec, rid = write_spec(tmp_path, SPEC), run_id("small")
    ran = cli("start", str(spec), *AGENTS, "--task-queue", run_id("q-small"), "--id", rid, extra_env=env)
    assert ran.code == 0, ran.out + ran.err

    write, read = results(await history(client, rid))
    stored = Path(placeholder(write)["claimData"]["file"])  # 6 KB: over this threshold
    assert json.loads(read.data)["text"] == "a short summary"
    reported = cli("report", rid, "--outputs", extra_env=env)
    assert reported.code == 0 and "notes notes" in reported.out, reported.err  # fetched back from the store

    elsewhere = cli("logs", rid, extra_env={blobs.URL_ENV: str(tmp_path / "elsewhere")})
    assert elsewhere.code == 3 and "(reply)" not in elsewhere.out  # it stops at the reply it cannot fetch
    folder = tmp_path / "state" / "blobs"
    assert f"hint: it was written to the folder {folder}: set AGENTRUN_BLOB_URL={folder}," in elsewhere.err

    stored.unlink()
    gone = cli("logs", rid, extra_env=env)
    assert gone.code == 3 and gone.err.startswith(f"error: the large value {stored} cannot be read")
    assert "hint: it was removed from this folder, or the worker writes to another one" in gone.err


@pytest.mark.parametrize(
    ("name", "value", "said"),
    [
        (blobs.URL_ENV, "blobs", "AGENTRUN_BLOB_URL: 'blobs' is neither s3://BUCKET/PREFIX nor an absolute folder"),
        (blobs.URL_ENV, "s3:///runs", "AGENTRUN_BLOB_URL: 's3:///runs' names no bucket"),
        (blobs.THRESHOLD_ENV, "256KB", "AGENTRUN_BLOB_THRESHOLD: '256KB' is not a number of bytes"),
        (blobs.THRESHOLD_ENV, "4000000", "AGENTRUN_BLOB_THRESHOLD: '4000000' is over the 2 MB"),
    ],
)
def test_a_setting_that_cannot_work_is_refused_before_anything_connects(cli, name, value, said):
    refused = cli("status", "any-run", extra_env={name: value})
    assert refused.code == 2 and refused.err.startswith(f"error: {said}") and "hint: " in refused.err


TWO_STEPS = """\
workflow:
  name: two
  agents: {one: {prompt: go}, two: {prompt: go}}
  steps: [{id: one, agent: one}, {id: two, agent: two}]
"""


@pytest.mark.usefixtures("worker")
async def test_a_run_past_the_old_inline_limits_goes_on_and_replays(client, llm, tmp_path):
    """Two 1.1 MB replies make a state runs once had to stop at (1.8 MB): now it goes by reference.
    The run records the change, so runs from before it replay with the limit they had."""
    llm.reply = "many words " * 100_000
    state = await run_spec(client, write_spec(tmp_path, TWO_STEPS), "openai:m")
    assert state.status == "completed", state.errors
    assert state.steps["one"]["output"] == state.steps["two"]["output"] == llm.reply

    history = await client.get_workflow_handle(state.run_id).fetch_history()
    marked = [
        e
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
        and sizes.BY_REFERENCE.encode() in e.marker_recorded_event_attributes.SerializeToString()
    ]
    assert len(marked) == 1
    replayer = Replayer(workflows=WORKFLOWS, data_converter=blobs.data_converter(), workflow_runner=runner())
    replayed = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert replayed.replay_failure is None


def test_a_worker_refuses_a_setting_that_cannot_work(address):
    environ = {**os.environ, "TEMPORAL_ADDRESS": address, blobs.URL_ENV: "s3://"}
    ran = subprocess.run(
        [sys.executable, "-m", "agentrun.worker"], env=environ, capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert ran.returncode == 2 and "error: AGENTRUN_BLOB_URL: 's3://' names no bucket\n  hint: " in ran.stderr


MAPPED = """\
workflow:
  name: mapped
  agents:
    lister: {prompt: "List the parts."}
    worker: {prompt: "Write part {{ item }}."}
    editor: {prompt: "Join the parts."}
  steps:
    - {id: list, agent: lister, output: {format: json}}
    - {id: each, type: map, map: {over: "{{ steps.list.output.items }}", agent: worker}}
    - {id: join, agent: editor, input: "{{ steps.each.output }}"}
"""
PROVIDED = """\
name: provided
subtasks:
  dump:
    provider_call: {provider: shell, method: run, params: {command: "python3 -c \\"print('row ' * 80000)\\""}}
"""


@pytest.mark.usefixtures("worker")
async def test_a_maps_collected_results_and_a_providers_result_go_by_reference(client, llm, tmp_path):
    part = "words of a part " * 6_000  # 96 KB: each part inline, the three together not
    llm.by_model.update({"lister": '{"items": [1, 2, 3]}', "worker": part, "editor": "joined"})
    agents = {name: f"openai:{name}" for name in ("lister", "worker", "editor")}
    state = await run_spec(client, write_spec(tmp_path, MAPPED), "openai:m", agents=agents)
    assert state.status == "completed", state.errors
    assert llm.prompts_for("editor")[0].count(part.strip()) == 3
    events = await history(client, state.run_id)
    assert {p.metadata["encoding"] for p in results(events)} == {b"json/plain"}  # each reply inline
    scheduled = [e.activity_task_scheduled_event_attributes for e in events if e.event_type == SCHEDULED]
    assert scheduled[-1].activity_id.startswith("6: editor")  # given the three parts
    assert placeholder(scheduled[-1].input.payloads[0])["driverName"] == "agentrun.folder"

    state = await run_spec(client, write_spec(tmp_path, PROVIDED), "openai:m")
    assert state.status == "completed", state.errors
    assert state.tasks["dump"].output_size == 320_001 and state.outputs["dump"] == ("row " * 80_000)[:64_000]
    [dump] = results(await history(client, state.run_id))
    assert placeholder(dump)["driverName"] == "agentrun.folder"
    assert "row " * 80_000 in str((await client.data_converter.decode([dump]))[0])  # fetched back whole


@pytest.mark.parametrize(
    "value",
    [
        "plain",
        'quotes " and \\ slashes / and\ncontrol\t\x01 characters',
        "ünïcødé, 中文, emoji 🎉",
        "x" * 300_000,  # a length that takes a longer varint
        {"items": [1, 2.5, None, True], "nested": {"k": "v"}},
        ["a", {"b": []}],
    ],
)
def test_a_value_is_measured_at_the_size_the_converter_sends(value):
    # The size checks decide which step fails for a value too big to keep: measured apart from the
    # converter, they must still see the bytes it sends.
    sent = blobs.data_converter().payload_converter.to_payloads([value])[0]
    assert sizes.payload_bytes(value) == sent.ByteSize()
    # The state's bound may count a value high, never low: a check skipped must be one that passes.
    assert sent.ByteSize() <= sizes.value_bytes_bound(value) <= sent.ByteSize() + sizes.PAYLOAD_FRAMING


def test_a_model_is_measured_at_the_size_the_converter_sends():
    from agentrun.models.contract import TaskState

    row = TaskState(id="write", title="write — round 2", kind="task", agent="writer", error="ünï " * 1000)
    assert sizes.payload_bytes(row) == blobs.data_converter().payload_converter.to_payloads([row])[0].ByteSize()


async def test_with_an_s3_url_conversations_go_to_the_bucket_too(s3, monkeypatch):
    bucket, settings = s3
    for name, value in {**settings, blobs.URL_ENV: "s3://agentrun-test/runs"}.items():
        monkeypatch.setenv(name, value)
    logs = blobs.logs()
    await logs.write("default/a run", "log-1", 0, [b'{"n": 0}', b'{"n": 1}'])

    assert await logs.read("default/a run", "log-1", 0, 2) == [b'{"n": 0}', b'{"n": 1}']
    listed = bucket.list_objects_v2(Bucket="agentrun-test", Prefix="runs/default/")  # (moto keeps other tests' too)
    kept = sorted(o["Key"] for o in listed["Contents"])
    assert kept == [
        "runs/default/a%20run/conversations/log-1/0.json",
        "runs/default/a%20run/conversations/log-1/1.json",
    ]
    with pytest.raises(LookupError):  # an entry not there: the turn fails, saying its conversation is gone
        await logs.read("default/a run", "log-1", 2, 3)
