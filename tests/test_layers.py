"""The house in layers: each layer of agentrun imports only the layers below it (pyproject.toml's
[tool.importlinter] contracts), and the check catches a lower layer that reaches up."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "from importlinter.cli import lint_imports_command; lint_imports_command()",
            "--no-cache",
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_every_layer_imports_only_those_below():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def planted(tmp_path: Path, module: str, line: str) -> subprocess.CompletedProcess:
    """lint-imports on a copy of the package with `line` added to `module` (a path under agentrun/)."""
    shutil.copytree(ROOT / "agentrun", tmp_path / "agentrun", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    path = tmp_path / "agentrun" / module
    path.write_text(path.read_text() + f"\n{line}  # noqa\n")
    return lint_imports(tmp_path)


def test_a_lower_layer_reaching_up_breaks_the_contract(tmp_path):
    # The edge that closed the old cycle: the worker naming its caller through the launcher.
    result = planted(tmp_path, "worker/connection.py", "from agentrun import launcher")
    assert result.returncode != 0
    assert "agentrun.worker.connection -> agentrun.launcher" in result.stdout


def test_a_command_reaching_past_the_engine_breaks_the_contract(tmp_path):
    # What the commands did before: read a run's state with Temporal's client, beside the API.
    result = planted(tmp_path, "cli/reading.py", "from agentrun.client.runs import fetch_state")
    assert result.returncode != 0
    assert "agentrun.cli.reading -> agentrun.client.runs" in result.stdout


def test_the_policy_reaching_into_a_tool_breaks_the_contract(tmp_path):
    # The decision the workflow and every tool source share may not lean on a tool's own module.
    result = planted(tmp_path, "policy/decision.py", "from agentrun.activities.tools.policy import is_protected")
    assert result.returncode != 0
    assert "agentrun.policy.decision -> agentrun.activities.tools.policy" in result.stdout
