"""`pending` lists every run waiting for a person, wherever its worker is, and the fix it prints for
a run no worker holds is one that works: the test runs it as printed and answers the gate."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess

from tests.conftest import ROOT, SHELL_AGENT, run_id, wait_for, write_spec
from tests.test_forkserver import read_until
from tests.test_terminal import HELD


def test_a_run_whose_terminal_ended_at_a_gate_is_pending_and_its_printed_fix_brings_the_gate_back(
    cli, cli_process, address, tmp_path
):
    spec, queue, rid = write_spec(tmp_path, HELD), run_id("q-gone"), run_id("held")
    own = f"{queue}/{rid}"  # no worker polls the queue, so the run gets one of its own
    # `start` on a terminal: no worker polls the queue, so the run gets one of its own, which only the
    # worker of this command polls.
    terminal = cli_process("start", str(spec), "--agent", SHELL_AGENT, "--id", rid, "--task-queue", queue)
    shown = read_until(terminal.stdout.fileno(), "answer with:", timeout_s=30)
    assert "\n? ship: Ship it? [approve/reject]" in shown, shown
    terminal.kill()  # closed: its worker ends with it, the run waits at its gate
    terminal.communicate()

    shown = cli("pending")
    assert shown.code == 0, shown.err
    assert "no run is waiting for anyone" not in shown.out
    fix = (
        f"no worker polls task queue '{own}', so nothing runs it: start one with `python -m worker --task-queue "
        f"{own}`, or run one here with `python -m client watch {rid} --worker`"
    )
    assert f"warning: run {rid}: no worker is answering for this run; {fix}" in shown.err
    row = next(line for line in shown.out.splitlines() if line.startswith(rid))
    assert row.split()[1:3] == ["?", "?"]
    assert f"(its question is read once a worker holds the run; {fix})" in row
    listed = cli("pending", "--json")
    # Other tests' runs may wait on this server too: this run's row is the one asked about.
    assert [(r["run_id"], r["gate"]) for r in json.loads(listed.out) if r["run_id"] == rid] == [(rid, None)]

    # The fix, run as printed (from the checkout, as the README's `python -m` commands are).
    printed = re.search(r"start one with `([^`]+)`", shown.err)
    assert printed is not None
    worker = subprocess.Popen(
        shlex.split(printed.group(1)),
        cwd=ROOT,
        env={**os.environ, "TEMPORAL_ADDRESS": address},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def asked_again() -> bool:
            return "Ship it?" in cli("pending").out

        wait_for(asked_again, timeout_s=60, poll_s=0.5)
        again = cli("pending")
        assert again.err == ""
        assert re.search(rf"^{re.escape(rid)}\s+ship\s+approval\s+Ship it\?", again.out, re.M), again.out
        assert cli("approve", rid, "--gate", "ship").code == 0
        done = cli("watch", rid)
        assert done.code == 0 and "- Status: COMPLETE" in done.out
    finally:
        worker.terminate()
        worker.wait(timeout=30)
