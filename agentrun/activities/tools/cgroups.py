"""A control group for one command: a number of processes it may not pass (pids.max), memory it may
not pass, and a way to kill everything it started, wherever that went.

RLIMIT_NPROC, the usual bound on a fork bomb, does nothing for root (the kernel exempts it) and
counts every process of the user, not the command's. A control group counts the command's own,
for root too. It needs a writable cgroup tree (cgroup v2, or v1's pids and memory hierarchies),
which a root worker usually has; without one, the sandbox falls back on rlimits.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")


@dataclass
class CallGroup:
    """The control group directories (one on v2; pids and memory on v1) made for one command."""

    dirs: list[Path] = field(default_factory=list)
    limits_memory: bool = False

    @property
    def procs_files(self) -> list[str]:
        """Where the command writes its own pid, before it runs anything, to join the group."""
        return [str(d / "cgroup.procs") for d in self.dirs]

    def kill_all(self) -> None:
        """SIGKILL every process in the group, again until none is left (a fork bomb forks on)."""
        for d in self.dirs:
            kill_file = d / "cgroup.kill"
            if kill_file.exists():
                with contextlib.suppress(OSError):
                    kill_file.write_text("1")
        for _ in range(100):
            pids = self._pids()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)

    def remove(self) -> None:
        self.kill_all()
        for d in self.dirs:
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # EBUSY until the last killed process is reaped
                    time.sleep(0.02)

    def _pids(self) -> list[int]:
        pids: set[int] = set()
        for d in self.dirs:
            with contextlib.suppress(OSError):
                pids.update(int(line) for line in (d / "cgroup.procs").read_text().split())
        return sorted(pids)


PREFIX = "agentrun-tool-"
STALE_S = 600  # an empty group this old was left by a worker that died mid-command


def create(processes: int, memory_bytes: int) -> CallGroup | None:
    """A new group with these limits, or None when this machine gives us no cgroup to write."""
    name = f"{PREFIX}{uuid.uuid4().hex[:12]}"
    bases = _bases()
    if bases is None:
        return None
    group = CallGroup()
    try:
        if "unified" in bases:
            d = bases["unified"] / name
            d.mkdir()
            group.dirs.append(d)
            (d / "pids.max").write_text(str(processes))
            with contextlib.suppress(OSError):
                (d / "memory.max").write_text(str(memory_bytes))
                (d / "memory.swap.max").write_text("0")
                group.limits_memory = True
            return group
        d = bases["pids"] / name
        d.mkdir()
        group.dirs.append(d)
        (d / "pids.max").write_text(str(processes))
        if "memory" in bases:
            m = bases["memory"] / name
            m.mkdir()
            group.dirs.append(m)
            (m / "memory.limit_in_bytes").write_text(str(memory_bytes))
            with contextlib.suppress(OSError):  # only with swap accounting on
                (m / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
            group.limits_memory = True
        return group
    except OSError:
        group.remove()
        return None


@functools.cache
def _bases() -> dict[str, Path] | None:
    """The worker's own cgroup in each hierarchy we use, when we may make groups below it."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    own = {}
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else ["unified"]:
            own[controller] = path
    found: dict[str, Path] = {}
    if (ROOT / "cgroup.controllers").exists() and "unified" in own:
        base = ROOT / own["unified"].lstrip("/")
        if _usable(base, "pids.max", enable="+pids +memory"):
            found["unified"] = base
    else:
        for controller in ("pids", "memory"):
            if controller in own:
                base = ROOT / controller / own[controller].lstrip("/")
                limit = "pids.max" if controller == "pids" else "memory.limit_in_bytes"
                if _usable(base, limit):
                    found[controller] = base
        if "pids" not in found:
            found.clear()
    for base in found.values():
        sweep(base)
    return found or None


def sweep(base: Path) -> None:
    """Remove the groups a worker killed mid-command left behind (its command died with it): empty,
    and made long enough ago that no worker is about to join them."""
    now = time.time()
    for group in base.glob(f"{PREFIX}*"):
        with contextlib.suppress(OSError):
            if now - group.stat().st_mtime > STALE_S and not (group / "cgroup.procs").read_text().strip():
                group.rmdir()


def _usable(base: Path, limit_file: str, enable: str = "") -> bool:
    """Whether a group made below `base` gets `limit_file`: try once, and leave nothing behind."""
    probe = base / f"agentrun-probe-{os.getpid()}"
    try:
        if enable:
            with contextlib.suppress(OSError):
                (base / "cgroup.subtree_control").write_text(enable)
        probe.mkdir()
    except OSError:
        return False
    try:
        return (probe / limit_file).exists()
    finally:
        with contextlib.suppress(OSError):
            probe.rmdir()
