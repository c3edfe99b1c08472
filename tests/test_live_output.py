"""Watching an agent work: a reply streamed by the fake OpenAI server a word at a time (each word when
the test lets it go) shows while the call runs in `status --json`, in the run's description (the
pending activity's heartbeat details, as Temporal Web's card shows them), in `logs --follow`, and
under the step's line in `watch`: in place in a terminal, appended lines when piped. A kill -9 of the
worker mid-stream: the call is retried and the reply recorded once."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pyte
import pytest
from temporalio.client import Client

from agentrun.models.calls import Partial
from tests.conftest import ROOT, _cli_env, run_id, sigkill, start_worker, wait_for, watched_by_a_new_worker, write_spec
from tests.fakes.drip import Drip
from tests.fakes.openai_server import FakeOpenAI

REPLY = "alpha one\nbeta two\ngamma three\nCOMPLETION_STATUS: COMPLETE\n"
SPEC = "name: live\nsubtasks:\n  plan: {instructions: Make a plan.}\n"


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(by_model={"writer": REPLY}, api_key="sk-test") as server:
        yield server


def agent_env(server: FakeOpenAI) -> dict[str, str]:
    return {"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "sk-test"}


class Lines:
    """A process's output, read line by line as it comes (in a thread)."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc, self.lines = proc, []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def has(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    def end(self) -> str:
        self.proc.wait(timeout=120)
        self.thread.join(timeout=30)
        return "\n".join(self.lines)


def status(cli, rid: str) -> dict:
    result = cli("status", rid, "--json")
    assert result.code == 0, result.err
    return json.loads(result.out)


def partial_of(cli, rid: str) -> dict | None:
    (task,) = status(cli, rid)["tasks"]
    return task.get("partial")


def shows(cli, rid: str, tail: str) -> bool:
    found = partial_of(cli, rid)
    return found is not None and found["tail"] == tail


async def heartbeat_details(client: Client, rid: str) -> tuple[dict, Partial]:
    """The run's pending agent call's heartbeat: the raw payload Temporal Web shows, and decoded."""
    (pending,) = (await client.get_workflow_handle(rid).describe()).raw_description.pending_activities
    (payload,) = pending.heartbeat_details.payloads
    assert payload.metadata["encoding"] == b"json/plain"  # readable as it is on the activity's card
    (record,) = await client.data_converter.decode([payload], [Partial])
    return json.loads(payload.data), record


def start_detached(cli, spec: Path, rid: str, queue: str) -> None:
    started = cli("start", str(spec), "--agent", "openai:writer", "--id", rid, "--task-queue", queue, "--detach")
    assert started.code == 0, started.out + started.err


async def test_a_growing_reply_shows_in_status_the_description_and_logs_follow(
    cli, cli_process, client, address, tmp_path, fake
):
    queue, rid = run_id("q-live"), run_id("live")
    drip = fake.drip("writer")
    worker = start_worker(address, "--task-queue", queue, env=agent_env(fake))
    try:
        start_detached(cli, write_spec(tmp_path, SPEC), rid, queue)
        follow = Lines(cli_process("logs", rid, "--follow"))
        drip.wait_sent(1)
        wait_for(lambda: shows(cli, rid, "alpha "))
        raw, record = await heartbeat_details(client, rid)
        assert raw["tail"] == record.tail == "alpha " and record.task == "plan" and record.status == "writing"
        drip.allow(2)  # "one\n", "beta "
        wait_for(lambda: shows(cli, rid, "alpha one\nbeta "))
        grown = partial_of(cli, rid)
        assert grown is not None and grown["chars"] == len("alpha one\nbeta ") and grown["tokens"] == 3
        wait_for(lambda: follow.has("alpha one"))  # printed while the call still runs
        assert not follow.has("(reply)")
        drip.allow_all()
        logged = follow.end()
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    # Under its prompt (the heartbeats run ahead of the history), the reply as it grew, then whole, once.
    growing = logged.index("── plan ← agent 'default' (writing)")
    assert logged.index("(prompt)") < growing
    assert logged.index("alpha one", growing) < logged.index("(reply)")
    assert logged.count("(reply)") == 1 and logged.rstrip().endswith(REPLY.rstrip())
    final = status(cli, rid)
    (task,) = final["tasks"]
    assert task["status"] == "completed" and "partial" not in task and task["first_token_s"] > 0
    (request,) = fake.requests
    assert request.body["stream"] is True and (task["usage"]["input_tokens"], task["usage"]["output_tokens"]) == (
        request.reported
    )
    assert "- Time to first token: plan " in cli("report", rid).out


def read_screen(fd: int, screen: pyte.Screen, stream: pyte.ByteStream) -> None:
    try:
        while data := os.read(fd, 65536):
            stream.feed(data)
    except OSError:  # the child closed the terminal
        pass


def on_screen(screen: pyte.Screen) -> list[str]:
    return [line.rstrip() for line in screen.display]


def test_watch_keeps_a_live_tail_in_place_in_a_terminal(address, tmp_path, fake):
    queue, rid = run_id("q-tty"), run_id("tty")
    drip = fake.drip("writer")
    spec = write_spec(tmp_path, SPEC)
    worker = start_worker(address, "--task-queue", queue, env=agent_env(fake))
    screen = pyte.Screen(120, 60)
    stream = pyte.ByteStream(screen)
    parent, child = pty.openpty()
    argv = [sys.executable, "-m", "agentrun.client", "start", str(spec), "--agent", "openai:writer"]
    env = {**_cli_env(address, tmp_path), "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "60"}
    proc = subprocess.Popen(
        [*argv, "--id", rid, "--task-queue", queue], stdin=child, stdout=child, stderr=child, env=env, cwd=ROOT
    )
    os.close(child)
    reader = threading.Thread(target=read_screen, args=(parent, screen, stream), daemon=True)
    reader.start()
    try:
        drip.wait_sent(1)
        wait_for(lambda: "    │ alpha" in on_screen(screen))
        drip.allow(3)  # "one\n", "beta ", "two\n"
        wait_for(lambda: "    │ beta two" in on_screen(screen))
        shown = on_screen(screen)
        # Redrawn where it was: one tail of the step, no copy of the earlier one left above it.
        assert [line for line in shown if "│" in line] == ["    │ alpha one", "    │ beta two"], shown
        assert sum(line.startswith("▶ plan") for line in shown) == 1
        drip.allow_all()
        assert proc.wait(timeout=120) == 0
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        if proc.poll() is None:
            proc.kill()
        reader.join(timeout=10)
        os.close(parent)
    shown = on_screen(screen)
    assert not any("│" in line for line in shown), shown  # the live part goes once the run ends
    assert any(line.startswith("✓ plan done") for line in shown)


def test_watch_appends_plain_lines_when_piped_and_says_when_an_agent_stalls(cli, cli_process, address, tmp_path, fake):
    queue, rid = run_id("q-pipe"), run_id("piped")
    drip: Drip = fake.drip("writer")
    worker = start_worker(address, "--task-queue", queue, env=agent_env(fake))
    try:
        start_detached(cli, write_spec(tmp_path, SPEC), rid, queue)
        watched = Lines(cli_process("watch", rid, "--stall", "1"))
        drip.wait_sent(1)
        drip.allow(1)  # "one\n": a whole line
        wait_for(lambda: watched.has("│ plan: alpha one"))
        # Nothing more comes while the test holds the rest: after a second, watch says so, once.
        wait_for(lambda: watched.has("! plan: agent 'default' has written nothing more for"))
        drip.allow_all()
        out = watched.end()
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    assert watched.proc.returncode == 0, out  # a stall is said, not a failure
    assert "\x1b[" not in out  # no cursor movement: plain lines
    appended = [line for line in out.splitlines() if line.startswith("  │ plan: ")]
    assert appended == [f"  │ plan: {line}" for line in REPLY.splitlines()[: len(appended)]] and len(appended) >= 1
    # Said once per silence, not at every poll: once for the wait after "one", and once more only
    # when a slow poll also caught the wait after "alpha " (the test lets "one" out at once).
    assert 1 <= sum("has written nothing more" in line for line in out.splitlines()) <= 2


def test_a_worker_killed_mid_stream_the_call_is_retried_and_its_reply_recorded_once(cli, address, tmp_path, fake):
    queue, rid = run_id("q-kill"), run_id("killed")
    drip = fake.drip("writer")
    first = start_worker(address, "--task-queue", queue, env=agent_env(fake))
    start_detached(cli, write_spec(tmp_path, SPEC), rid, queue)
    drip.wait_sent(1)
    wait_for(lambda: shows(cli, rid, "alpha "))
    sigkill(first)
    drip.allow_all()
    watched = watched_by_a_new_worker(cli, address, rid, "--task-queue", queue, env=agent_env(fake))
    assert watched.code == 0, watched.out + watched.err
    first_call, retried = fake.requests_for("writer")
    assert first_call.body == retried.body  # the same prompt, asked again once
    logged = cli("logs", rid).out
    assert logged.count("(reply)") == 1 and logged.count("gamma three") == 1
    (task,) = status(cli, rid)["tasks"]
    assert task["status"] == "completed" and task["retries"] == 1
    assert re.search(r"plan: agent 'default' answered on attempt 2", cli("report", rid).out)
