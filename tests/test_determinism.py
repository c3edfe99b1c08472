"""Workflow code is deterministic: no clock, randomness, environment or I/O of its own.

The worker runs workflow code outside Temporal's sandbox (see agentrun/worker/build.py), so no
restriction catches a slip at run time. This test reads every workflow module instead, whatever the
suite happens to run; the replay test replays each history it records with the modules sandboxed."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

WORKFLOW_CODE = (
    sorted((ROOT / "agentrun" / "workflows").rglob("*.py"))
    + [ROOT / "agentrun" / "models" / name for name in ("contract.py", "limits.py")]
    # The policy's decision, which the workflow makes for its own tools; a URL is decided (with
    # httpx's parser, policy/web.py) only in a web tool's activity.
    + [p for p in sorted((ROOT / "agentrun" / "policy").glob("*.py")) if p.name != "web.py"]
)
# Called on these names, the value differs between a run and its replay; Temporal's own is the way.
CALLS = {
    ("datetime", "now"): "workflow.now()",
    ("datetime", "utcnow"): "workflow.now()",
    ("date", "today"): "workflow.now().date()",
    ("time", "time"): "workflow.time()",
    ("time", "monotonic"): "workflow.time()",
    ("time", "perf_counter"): "workflow.time()",
    ("time", "sleep"): "workflow.sleep() or asyncio.sleep()",
    ("uuid", "uuid1"): "workflow.uuid4()",
    ("uuid", "uuid4"): "workflow.uuid4()",
    ("os", "getenv"): "a value in the run's input",
    ("os", "environ"): "a value in the run's input",
}
MODULES = {"random": "workflow.random()", "httpx": "an activity", "subprocess": "an activity", "socket": "an activity"}
BUILTINS = {"open": "an activity", "input": "an update"}


def slips(path: Path, root: Path = ROOT) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        where = f"{path.relative_to(root)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            use = CALLS.get((node.value.id, node.attr))
            if use:
                found.append(f"{where}: {node.value.id}.{node.attr}; use {use}")
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            for name in names:
                use = MODULES.get(name.split(".")[0])
                if use:
                    found.append(f"{where}: imports {name}; use {use}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in BUILTINS:
            found.append(f"{where}: {node.func.id}(); use {BUILTINS[node.func.id]}")
    return found


@pytest.mark.parametrize("path", WORKFLOW_CODE, ids=lambda p: str(p.relative_to(ROOT / "agentrun")))
def test_workflow_code_reads_no_clock_randomness_environment_or_files(path: Path):
    assert slips(path) == []


def test_the_check_finds_a_slip(tmp_path):
    slip = tmp_path / "slip.py"
    slip.write_text("import random\nfrom datetime import datetime\n\nstamp = datetime.now()\nopen('x')\n")
    assert sorted(slips(slip, tmp_path)) == [
        "slip.py:1: imports random; use workflow.random()",
        "slip.py:4: datetime.now; use workflow.now()",
        "slip.py:5: open(); use an activity",
    ]
