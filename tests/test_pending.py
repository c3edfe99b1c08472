"""`pending` lists every run waiting for a person, wherever its worker is, from the server's
visibility store (no run is asked), and the fix it prints for a run no worker holds is one that
works: the test runs it as printed and answers the gates."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys

from tests.conftest import ROOT, SHELL_AGENT, run_id, wait_for, write_spec
from tests.test_forkserver import read_until

# Two gates in a row: the first closed, the run waits at the second.
TWO_GATES = """\
name: held
subtasks:
  ship:
    approval: {prompt: "Ship it?"}
    instructions: "```sh\\necho shipped\\n```"
  tell:
    approval: {prompt: "Tell them?"}
    instructions: "```sh\\necho told\\n```"
"""


def _rows(cli, rid: str) -> list[tuple[str, str, str]]:
    listed = cli("pending", "--json")
    assert listed.code == 0, listed.err
    # Other tests' runs may wait on this server too: this run's rows are the ones asked about.
    return [(r["gate"], r["kind"], r["prompt"]) for r in json.loads(listed.out) if r["run_id"] == rid]


def test_a_run_whose_worker_is_gone_is_pending_with_its_question_and_a_closed_gate_leaves_the_list(
    cli, cli_process, address, tmp_path
):
    spec, queue, rid = write_spec(tmp_path, TWO_GATES), run_id("q-gone"), run_id("held")
    own = f"{queue}/{rid}"  # no worker polls the queue, so the run gets one of its own
    # `start` on a terminal: no worker polls the queue, so the run gets one of its own, which only the
    # worker of this command polls.
    terminal = cli_process("start", str(spec), "--agent", SHELL_AGENT, "--id", rid, "--task-queue", queue)
    shown = read_until(terminal.stdout.fileno(), "answer with:", timeout_s=30)
    assert "\n? ship: Ship it? [approve/reject]" in shown, shown
    terminal.kill()  # closed: its worker ends with it, the run waits at its gate
    terminal.communicate()

    # Nobody can answer a query for the run now: its question comes from the server's visibility
    # store (the run's memo), whole.
    wait_for(lambda: _rows(cli, rid) == [("ship", "approval", "Ship it?")], timeout_s=10)
    shown = cli("pending")
    assert shown.code == 0, shown.err
    fix = (
        f"no worker polls task queue '{own}', so nothing runs it: start one with `python -m worker --task-queue "
        f"{own}`, or run one here with `python -m client watch {rid} --worker`"
    )
    assert f"warning: run {rid}: no worker is answering for this run; {fix}" in shown.err
    assert re.search(rf"^{re.escape(rid)}\s+ship\s+approval\s+Ship it\?", shown.out, re.M), shown.out

    # The fix, run as printed (from the checkout, as the README's `python -m` commands are).
    printed = re.search(r"start one with `([^`]+)`", shown.err)
    assert printed is not None
    argv = shlex.split(printed.group(1))
    assert argv[0] == "python"
    worker = subprocess.Popen(
        [sys.executable, *argv[1:]],  # the suite's python, whether or not its venv is on PATH
        cwd=ROOT,
        env={**os.environ, "TEMPORAL_ADDRESS": address},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: rid not in cli("pending").err, timeout_s=60, poll_s=0.5)
        assert cli("approve", rid, "--gate", "ship").code == 0
        # The closed gate leaves the list; the run's next one takes its place.
        wait_for(lambda: _rows(cli, rid) == [("tell", "approval", "Tell them?")], timeout_s=30, poll_s=0.5)
        assert cli("approve", rid, "--gate", "tell").code == 0
        done = cli("watch", rid)
        assert done.code == 0 and "- Status: COMPLETE" in done.out
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    assert _rows(cli, rid) == []
