"""The embedded server's port taken by a program agentrun did not start: something that is not
Temporal fails the command at once, naming the port, what listens there and the variable that
moves the embedded server; a Temporal server already listening is used, and said so."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.conftest import ROOT


def _status(port: int, tmp_path) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "AGENTRUN_"))}
    environ.update(AGENTRUN_SERVER_PORT=str(port), AGENTRUN_STATE_DIR=str(tmp_path / "state"))
    return subprocess.run(
        [sys.executable, "-m", "agentrun.client", "status", "no-such-run"],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def plain_listener() -> Iterator[int]:
    """A TCP listener that accepts and never answers, as a program of another kind would."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_a_port_taken_by_something_else_fails_naming_the_port_the_program_and_the_variable(plain_listener, tmp_path):
    done = _status(plain_listener, tmp_path)
    assert done.returncode == 3, done.stderr
    assert f"127.0.0.1:{plain_listener} is taken by pid {os.getpid()} (" in done.stderr
    assert "not a Temporal server" in done.stderr
    assert "set AGENTRUN_SERVER_PORT to a free port" in done.stderr
    assert "check TEMPORAL_ADDRESS" not in done.stderr
    assert not (tmp_path / "state" / "temporal.pid").exists()  # no server of ours was started


def test_a_temporal_server_already_on_the_port_is_used_and_said(address, tmp_path):
    port = int(address.rsplit(":", 1)[1])
    done = _status(port, tmp_path)
    assert f"using the Temporal server already listening on 127.0.0.1:{port}" in done.stderr
    assert "AGENTRUN_SERVER_PORT moves agentrun's own" in done.stderr
    assert "(temporal), not one agentrun started" in done.stderr
    # Reached: the run is unknown there (exit 2), where an unreachable server is exit 3.
    assert "error: no run with id 'no-such-run'" in done.stderr and done.returncode == 2, done.stderr
