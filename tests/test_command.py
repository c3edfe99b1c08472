"""The installed command: `agentrun` in a fresh virtual environment, one top-level package, and shell
completion."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

QUICKSTART = ROOT / "examples" / "quickstart.yaml"


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A fresh venv with agentrun installed from a copy of the source (not editable, so nothing of the
    checkout is importable); the dependencies come from this interpreter's site-packages, which a .pth
    file names: `--system-site-packages` alone reaches the base interpreter's, not those of a venv this
    suite runs in (where most people run it)."""
    base = tmp_path_factory.mktemp("venv")
    source = base / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "agentrun", source / "agentrun", ignore=shutil.ignore_patterns("__pycache__"))
    wheels = base / "wheels"
    build = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(source)]
    subprocess.run(build, check=True, capture_output=True)
    env = base / "env"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(env)], check=True)
    inner = Path(
        subprocess.check_output(
            [str(env / "bin" / "python"), "-c", "import site; print(site.getsitepackages()[0])"], text=True
        ).strip()
    )
    (inner / "outer-site-packages.pth").write_text("".join(f"{folder}\n" for folder in site.getsitepackages()))
    install = [str(env / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", *map(str, wheels.glob("*.whl"))]
    subprocess.run(install, check=True, capture_output=True)
    return env


def run(venv: Path, *args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    environ = {**os.environ, **env, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    environ.pop("PYTHONPATH", None)  # nothing of a checkout on the path: the installed package alone
    return subprocess.run(list(args), cwd=cwd, env=environ, capture_output=True, text=True, timeout=120)


def test_agentrun_is_one_command_and_one_package_in_a_fresh_venv(venv, tmp_path):
    help_text = run(venv, "agentrun", "--help", cwd=tmp_path)
    assert help_text.returncode == 0
    assert "usage: agentrun" in help_text.stdout
    for command in ("start", "watch", "status", "report", "worker", "completion"):
        assert f"\n    {command}" in help_text.stdout

    checked = run(venv, "agentrun", "validate", str(QUICKSTART), cwd=tmp_path)
    assert (checked.returncode, checked.stderr) == (0, "")
    assert "valid task-tree spec 'quickstart' with 4 task(s)" in checked.stdout
    worker = run(venv, "agentrun", "worker", "--help", cwd=tmp_path)
    assert worker.returncode == 0 and "usage: agentrun worker" in worker.stdout

    # Everything the distribution puts on sys.path is under agentrun/: no top-level `client` or `worker`.
    listing = run(
        venv,
        "python",
        "-c",
        "import importlib.metadata as m, agentrun;"
        "print(agentrun.__file__);"
        "print(sorted({f.parts[0] for f in m.files('agentrun') if f.suffix == '.py'}))",
        cwd=tmp_path,
    )
    where, tops = listing.stdout.splitlines()
    assert where.startswith(str(venv))
    assert tops == "['agentrun']"


def test_python_m_client_and_worker_still_work_in_the_checkout():
    for module, usage in (("client", "usage: python -m client"), ("worker", "usage: python -m worker")):
        shown = subprocess.run(
            [sys.executable, "-m", module, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        assert shown.returncode == 0 and usage in shown.stdout


def test_shell_completion_completes_commands_and_options(venv, tmp_path):
    code = run(venv, "agentrun", "completion", "bash", cwd=tmp_path)
    assert code.returncode == 0
    registered = run(venv, "bash", "-c", f"{code.stdout}\ncomplete -p agentrun", cwd=tmp_path)
    assert registered.returncode == 0 and registered.stdout.strip().endswith(" agentrun")

    def complete(line: str) -> list[str]:
        out = tmp_path / "completions"
        asked = run(
            venv,
            "agentrun",
            cwd=tmp_path,
            _ARGCOMPLETE="1",
            _ARGCOMPLETE_IFS="\n",
            _ARGCOMPLETE_STDOUT_FILENAME=str(out),
            COMP_LINE=line,
            COMP_POINT=str(len(line)),
        )
        assert asked.returncode == 0, asked.stderr
        return sorted(out.read_text().split())

    assert complete("agentrun st") == ["start", "status"]
    assert complete("agentrun w") == ["watch", "worker"]
    assert "--detach" in complete("agentrun start --d")
    assert complete("agentrun worker --log-format ") == ["json", "text"]
