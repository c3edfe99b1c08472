"""Loading specs in tests, and reading the one error a bad spec gives, as a user reads it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentrun.lang import ir
from agentrun.lang.errors import SpecError
from agentrun.lang.load import load
from tests.conftest import ROOT, write_spec

# A person at both ends: a question with choices, then an approval (test_human_cli, test_ui).
SHED = """\
name: shed
subtasks:
  colour:
    human: {prompt: "Which colour for the shed?", choices: [red, blue]}
  paint:
    instructions: "Paint the shed {{ human.colour }}."
    compensate: "Strip the paint. You reported: {{ output }}"
  ship:
    approval: true
    instructions: "Ship the shed."
"""


def plan_of(tmp_path: Path, text: str) -> ir.Plan:
    return load(str(write_spec(tmp_path, text)))


def error(tmp_path: Path, text: str) -> str:
    """The one problem loading `text` gives, as the user reads it."""
    with pytest.raises(SpecError) as info:
        plan_of(tmp_path, text)
    problems = [str(p) for p in info.value.problems]
    assert len(problems) == 1, "expected one clear error, got:\n" + "\n".join(problems)
    return problems[0]


def at(tmp_path: Path, text: str, needle: str, column: int | None = None, nth: int = 0) -> str:
    """`file:line:column: error:` for the nth line of `text` containing `needle`; the column is
    where `needle` starts unless given."""
    found = [(n, line) for n, line in enumerate(text.splitlines(), 1) if needle in line]
    assert len(found) > nth, f"{needle!r} is not in the spec {nth + 1} time(s)"
    number, line = found[nth]
    col = column if column is not None else line.index(needle) + 1
    return f"{tmp_path / 'spec.yaml'}:{number}:{col}: error: "


def swap(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"{old!r} must occur once"
    return text.replace(old, new)


def nodes(plan: ir.Plan) -> dict[str, ir.NodeBase]:
    return {n.id: n for n in plan.walk()}


def run_cli(*args: str) -> subprocess.CompletedProcess:
    """`python -m client ...` with Temporal out of reach and no default agent: for the commands
    (validate, inspect, dry-run) that must need neither."""
    env = {**os.environ, "TEMPORAL_ADDRESS": "127.0.0.1:1"}
    env.pop("AGENTRUN_AGENT", None)
    return subprocess.run(
        [sys.executable, "-m", "agentrun.client", *args], capture_output=True, text=True, timeout=60, env=env, cwd=ROOT
    )
