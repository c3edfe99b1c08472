"""A worker's Prometheus port listens on loopback unless told otherwise: from this machine's other
address nothing answers, and `--metrics-host` opens it on purpose."""

from __future__ import annotations

import socket

import httpx
import pytest

from tests.conftest import run_id, start_worker, wait_for
from tests.test_ui_guard import free_port, non_loopback_address


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _refused(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex((host, port)) != 0


@pytest.mark.parametrize("opened", [False, True], ids=["default", "metrics-host"])
def test_the_metrics_port_binds_loopback_unless_told(address, opened):
    where = non_loopback_address()
    if where is None:
        pytest.skip("this machine has no address beyond loopback")
    port = free_port()
    extra = ["--metrics-host", "0.0.0.0"] if opened else []
    worker = start_worker(address, "--task-queue", run_id("metrics-q"), "--metrics-port", str(port), *extra)
    try:
        wait_for(lambda: _answers(f"http://127.0.0.1:{port}/metrics"), timeout_s=30, poll_s=0.3)
        if opened:
            assert _answers(f"http://{where}:{port}/metrics")
        else:
            assert _refused(where, port)
    finally:
        worker.terminate()
        worker.wait(timeout=30)
