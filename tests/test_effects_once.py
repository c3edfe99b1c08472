"""Effects that never happen twice: kill -9 of the worker in the middle of a call with an effect,
and the retry carries the same idempotency key, so the outside world can recognise it."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_id, sigkill, start_worker, wait_for, watch_with_new_worker, write_spec

QUEUE = "effects-once-tests"


class Payments(ThreadingHTTPServer):
    """A payment API that charges once per Idempotency-Key and answers a repeated key with the
    first charge's receipt. Its first request is held until `release` is set: the worker dies then."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.keys: list[str] = []
        self.charges: dict[str, str] = {}
        self.lock = threading.Lock()
        self.release = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        payments = self.server
        assert isinstance(payments, Payments)
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        key = self.headers.get("Idempotency-Key", "")
        with payments.lock:
            payments.keys.append(key)
            first = len(payments.keys) == 1
        if first:
            payments.release.wait(60)
        with payments.lock:
            receipt = payments.charges.setdefault(key, f"receipt {len(payments.charges) + 1}")
        body = receipt.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def payments(monkeypatch: pytest.MonkeyPatch) -> Iterator[Payments]:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    server = Payments()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.release.set()
    server.shutdown()
    server.server_close()


def _start(cli, spec: Path, rid: str) -> None:
    started = cli("start", str(spec), "--agent", "scripted:none.yaml", "--id", rid, "--task-queue", QUEUE, "--detach")
    assert started.code == 0, started.err


def test_an_http_call_cut_by_kill_9_is_retried_with_its_key_and_charges_once(cli, address, tmp_path, payments):
    spec = write_spec(
        tmp_path,
        f"""name: pay
subtasks:
  charge:
    provider_call:
      provider: http
      method: post
      params: {{url: "{payments.url}/charges", json: {{amount: 5}}}}
""",
    )
    rid = run_id("pay")
    worker = start_worker(address, "--task-queue", QUEUE)
    try:
        _start(cli, spec, rid)
        wait_for(lambda: len(payments.keys) == 1)
    finally:
        sigkill(worker)  # the request is with the server: the charge happens, its receipt reaches no one
    payments.release.set()
    watched = watch_with_new_worker(cli, address, QUEUE, rid)
    assert watched.code == 0, watched.out + watched.err
    assert len(payments.keys) == 2 and payments.keys[0] == payments.keys[1] != ""
    assert len(payments.charges) == 1
    assert "receipt 1" in cli("report", rid, "--outputs").out
    assert "- Retried after a lost worker: charge (attempt 2)" in watched.out
    assert "- Retried after a lost worker: charge (attempt 2)" in cli("report", rid).out


def _lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def _waiting_step(log: str) -> str:
    """A shell provider call that writes its key, then waits for the test's go-ahead file (so an
    orphan of a killed worker ends too)."""
    command = f'echo "$AGENTRUN_IDEMPOTENCY_KEY" >> {log}.log; while [ ! -f {log}.go ]; do sleep 0.1; done'
    return f"provider_call: {{provider: shell, method: run, params: {{command: {json.dumps(command)}}}}}"


def test_a_shell_step_and_its_compensation_cut_by_kill_9_see_their_keys_again(cli, address, tmp_path):
    step = _waiting_step

    spec = write_spec(
        tmp_path,
        f"""name: reserve
subtasks:
  reserve:
    {step("reserve")}
    compensate:
      {step("undo")}
  fail:
    provider_call: {{provider: shell, method: run, params: {{command: "exit 3"}}}}
""",
    )
    work = tmp_path
    rid = run_id("undo")
    first = start_worker(address, "--task-queue", QUEUE)
    try:
        _start(cli, spec, rid)
        wait_for(lambda: len(_lines(work / "reserve.log")) == 1)
    finally:
        sigkill(first)
    (work / "reserve.go").touch()
    second = start_worker(address, "--task-queue", QUEUE)
    try:
        wait_for(lambda: len(_lines(work / "undo.log")) == 1)
    finally:
        sigkill(second)  # in the middle of the rollback
    (work / "undo.go").touch()
    watched = watch_with_new_worker(cli, address, QUEUE, rid)
    assert watched.code == 1, watched.out + watched.err
    reserve, undo = _lines(work / "reserve.log"), _lines(work / "undo.log")
    assert len(reserve) == 2 and reserve[0] == reserve[1]
    assert len(undo) == 2 and undo[0] == undo[1] != reserve[0]
    state = json.loads(cli("status", rid, "--json").out)
    assert state["status"] == "compensated"
    assert [c["status"] for c in state["compensations"]] == ["completed"]
    assert "reserve (attempt 2)" in watched.out


def test_a_cancel_during_the_rollback_lets_the_compensation_finish_once(cli, address, tmp_path):
    spec = write_spec(
        tmp_path,
        f"""name: undo-cancel
subtasks:
  reserve:
    provider_call: {{provider: shell, method: run, params: {{command: "echo reserved"}}}}
    compensate:
      {_waiting_step("undo")}
  fail:
    provider_call: {{provider: shell, method: run, params: {{command: "exit 3"}}}}
""",
    )
    rid = run_id("undo-cancel")
    worker = start_worker(address, "--task-queue", QUEUE)
    try:
        _start(cli, spec, rid)
        wait_for(lambda: len(_lines(tmp_path / "undo.log")) == 1)
        assert cli("cancel", rid).code == 0  # in the middle of the rollback
        (tmp_path / "undo.go").touch()
        watched = cli("watch", rid)
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    assert watched.code == 1, watched.out + watched.err
    assert len(_lines(tmp_path / "undo.log")) == 1
    state = json.loads(cli("status", rid, "--json").out)
    assert state["status"] == "compensated"
    assert [c["status"] for c in state["compensations"]] == ["completed"]
    assert "cancelled during the rollback: the compensations ran to the end" in state["warnings"]
