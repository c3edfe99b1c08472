"""Seeing what the agents said: `logs` prints each prompt and reply (and a local agent's stderr) in
order, for one task or all, following a run to its end; the report shows the reply that failed
validation, and `report --outputs` every step's output."""

from __future__ import annotations

import re

from tests.conftest import run_id, write_spec

PIPELINE = """\
workflow:
  name: talky
  agents:
    notes: {prompt: "Take notes on tea."}
    scorer: {prompt: "Score the notes as JSON."}
  steps:
    - id: take_notes
      agent: notes
    - id: score
      agent: scorer
      output: {format: json}
"""

# Writes to stderr, then says something that is not JSON.
AGENT = "command:sh -c 'cat >/dev/null; echo thinking hard >&2; echo \"tea is good, score: high\"'"


def test_logs_show_the_conversation_and_the_report_shows_the_reply_that_failed(cli, cli_process, tmp_path):
    spec, queue, rid = write_spec(tmp_path, PIPELINE), run_id("q-logs"), run_id("talky")
    assert cli("start", str(spec), "--agent", AGENT, "--id", rid, "--task-queue", queue, "--detach").code == 0
    following = cli_process("logs", rid, "--follow")
    ran = cli("watch", rid, "--worker")
    assert ran.code == 1 and "✗ score failed: output failed validation" in ran.out
    assert ran.out.endswith(
        "## Replies That Failed Validation\n\n### 2. score (the reply that failed)\n\n```\ntea is good, score: high\n```\n\n"
    )

    followed, _ = following.communicate(timeout=60)
    assert following.returncode == 0
    heads = re.findall(r"^── (?:\d\d:\d\d:\d\d )?(.*)$", followed, re.MULTILINE)
    assert heads == [
        "take_notes → agent 'notes' (prompt)",
        "take_notes ← agent 'notes' (reply)",
        "stderr of agent 'notes'",
        "score → agent 'scorer' (prompt)",
        "score ← agent 'scorer' (reply)",
        "stderr of agent 'scorer'",
    ]
    assert "(prompt)\nTake notes on tea.\n" in followed and "(reply)\ntea is good, score: high\n" in followed
    assert "stderr of agent 'notes'\nthinking hard\n" in followed
    assert cli("logs", rid).out == followed  # the same, read after the end

    one = cli("logs", rid, "--task", "score").out
    assert "take_notes" not in one and one.count("── ") == 3  # prompt, reply, stderr

    full = cli("report", rid, "--outputs").out
    assert "## Outputs\n\n### 1. take_notes\n\n```\ntea is good, score: high\n```\n" in full
    assert "### 2. score (the reply that failed)" in full
