"""The embedded server's port taken by a program agentrun did not start: something that is not
Temporal fails the command at once, naming the port, what listens there and the variable that
moves the embedded server; a Temporal server already listening is used, and said so."""

from __future__ import annotations

import os
import re
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


# Ports with names that cannot be confused: Temporal Web's and the inbox page's.


def test_temporal_webs_port_has_its_own_name_and_the_old_one_is_read_with_a_notice(monkeypatch, capsys):
    from agentrun.worker import embedded

    monkeypatch.delenv("AGENTRUN_UI_PORT", raising=False)
    monkeypatch.setenv("AGENTRUN_TEMPORAL_UI_PORT", "18233")
    assert embedded.ui_port() == 18233
    monkeypatch.delenv("AGENTRUN_TEMPORAL_UI_PORT")
    monkeypatch.setenv("AGENTRUN_UI_PORT", "18234")
    assert embedded.ui_port() == 18234
    assert "AGENTRUN_UI_PORT is read as AGENTRUN_TEMPORAL_UI_PORT" in capsys.readouterr().err


def test_the_inbox_page_serves_on_its_own_variables_port(address, tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "AGENTRUN_"))}
    environ.update(TEMPORAL_ADDRESS=address, AGENTRUN_INBOX_PORT=str(port), AGENTRUN_STATE_DIR=str(tmp_path))
    proc = subprocess.Popen(
        [sys.executable, "-u", "-m", "agentrun.client", "ui"],
        env=environ,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith(f"inbox at http://127.0.0.1:{port}/")
    finally:
        proc.kill()
        proc.wait()


def test_operations_lists_every_port_and_folder_and_no_page_gives_temporal_web_alone():
    operations = (ROOT / "docs" / "operations.md").read_text()
    section = operations.split("## Ports and folders", 1)[1].split("\n## ", 1)[0]
    for name in ("AGENTRUN_SERVER_PORT", "AGENTRUN_TEMPORAL_UI_PORT", "AGENTRUN_INBOX_PORT", "AGENTRUN_STATE_DIR"):
        assert f"`{name}`" in section, name
    for page in ("README.md", "docs/observability.md", "docs/operations.md"):
        text = (ROOT / page).read_text()
        # A run's own link in a command's output shown as printed is not where Temporal Web is said to be.
        for at in [m.start() for m in re.finditer(r"http://localhost:8233(?!/namespaces)", text)]:
            nearby = text[max(0, at - 300) : at + 300]
            assert "AGENTRUN_TEMPORAL_UI_PORT" in nearby or "ports-and-folders" in nearby, (page, nearby)
