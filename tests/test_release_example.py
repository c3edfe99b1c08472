"""examples/release.yaml, the README's "Humans in the loop" example, run as a user would: from the
command line, answered from another terminal."""

from __future__ import annotations

import json

import pytest

from tests.conftest import SHELL_AGENT, run_id, wait_for

pytestmark = pytest.mark.usefixtures("worker_process")
SPEC = "examples/release.yaml"


def waiting_on(cli, rid: str, gate: str) -> bool:
    pending = json.loads(cli("pending", "--json").out or "[]")
    return any(q["run_id"] == rid and q["gate"] == gate for q in pending)


def start(cli, tmp_path) -> str:
    rid = run_id("release")
    # The example's own agent config is relative to examples/; here the work goes to a fresh folder.
    started = cli("start", SPEC, "--id", rid, "--workdir", str(tmp_path), "--agent", SHELL_AGENT, "--detach")
    assert started.code == 0, started.err
    wait_for(lambda: waiting_on(cli, rid, "notes"))
    answered = cli("answer", rid, "--gate", "notes", "First stable release")
    assert answered.code == 0, answered.err
    wait_for(lambda: waiting_on(cli, rid, "publish"))
    return rid


def test_the_release_publishes_once_a_person_approves(cli, tmp_path):
    rid = start(cli, tmp_path)
    assert cli("approve", rid, "--gate", "publish", "--comment", "go").code == 0
    watched = cli("watch", rid)
    assert watched.code == 0, watched.out + watched.err
    assert "- Status: COMPLETE" in watched.out
    # In the order they happened: the notes answered, then the tag made with them.
    told = watched.out.splitlines()
    answered = next(i for i, line in enumerate(told) if line.startswith("✓ gate notes answered: First stable release"))
    assert answered < next(i for i, line in enumerate(told) if line.startswith("✓ tag done")), watched.out
    published = tmp_path / "release-work" / "PUBLISHED-1.0.0"
    assert published.read_text() == "1.0.0: First stable release\n"


def test_a_rejected_release_removes_its_tag(cli, tmp_path):
    rid = start(cli, tmp_path)
    assert (tmp_path / "release-work" / "TAG-1.0.0").exists()
    assert cli("reject", rid, "--gate", "publish", "--comment", "not today").code == 0
    watched = cli("watch", rid)
    assert watched.code == 1
    assert "- Status: ROLLED BACK" in watched.out
    assert "publish: rejected at gate 'publish'" in watched.out and "not today" in watched.out
    assert not (tmp_path / "release-work" / "TAG-1.0.0").exists()
    assert not (tmp_path / "release-work" / "PUBLISHED-1.0.0").exists()
