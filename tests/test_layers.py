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


def test_a_lower_layer_reaching_up_breaks_the_contract(tmp_path):
    shutil.copytree(ROOT / "agentrun", tmp_path / "agentrun", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    # The edge that closed the old cycle: the worker naming its caller through the launcher.
    connection = tmp_path / "agentrun" / "worker" / "connection.py"
    connection.write_text(connection.read_text() + "\nfrom agentrun import launcher  # noqa\n")
    result = lint_imports(tmp_path)
    assert result.returncode != 0
    assert "agentrun.worker.connection -> agentrun.launcher" in result.stdout
