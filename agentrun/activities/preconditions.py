"""The check_preconditions activity: copy sync targets in, then check that required paths exist.

As in task trees, a glob counts files and folders alike, and a sync target missing from the spec's
folder is skipped with a warning rather than failing the task.
"""

from __future__ import annotations

import asyncio
import glob
import shutil
from pathlib import Path

from temporalio import activity

from agentrun.models.calls import CHECK_PRECONDITIONS, CheckResult, PreconditionCall


class _Failed(Exception):
    pass


@activity.defn(name=CHECK_PRECONDITIONS)
async def check_preconditions(call: PreconditionCall) -> CheckResult:
    # File copies and globbing block; keep them off the worker's event loop.
    return await asyncio.to_thread(_check, call)


def _check(call: PreconditionCall) -> CheckResult:
    warnings = []
    try:
        for target in call.sync_targets:
            missing = _sync(Path(call.spec_dir), Path(call.workdir), target)
            if missing:
                warnings.append(missing)
    except _Failed as e:
        return CheckResult(ok=False, error=str(e), warnings=warnings)
    short = _shortfalls(call.workdir, call.files_exist, call.min_count)
    if short:
        return CheckResult(ok=False, error="; ".join(short), warnings=warnings)
    return CheckResult(ok=True, warnings=warnings)


def _sync(spec_dir: Path, workdir: Path, target: str) -> str | None:
    """Copy one target into the work directory; a warning when the spec's folder has no such path."""
    rel = Path(target)
    if rel.is_absolute() or ".." in rel.parts:
        raise _Failed(f"sync target {target!r} must be a path inside the spec folder {spec_dir}")
    src, dest = spec_dir / rel, workdir / rel
    if not src.exists():
        return f"sync target {target!r} not found in the spec folder {spec_dir}; nothing copied"
    if src.resolve() == dest.resolve():
        return None  # the spec folder is the work directory: nothing to copy
    _clear_other_kind(src, dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        if src.is_dir():
            shutil.copytree(src, dest, dirs_exist_ok=True)
        else:
            shutil.copy2(src, dest)
    except OSError as e:
        raise _Failed(f"cannot copy sync target {target!r} into {workdir}: {e}") from e
    return None


def _clear_other_kind(src: Path, dest: Path) -> None:
    """Overwriting means a file may replace a folder and the other way round."""
    if dest.is_symlink() or (dest.exists() and dest.is_dir() != src.is_dir()):
        if dest.is_dir() and not dest.is_symlink():
            shutil.rmtree(dest)
        else:
            dest.unlink()


def _shortfalls(workdir: str, patterns: list[str], min_count: int) -> list[str]:
    short = []
    for pattern in patterns:
        found = _count(workdir, pattern)
        if found == 0 and min_count > 0:
            short.append(f"no files match {pattern!r}")
        elif found < min_count:
            noun = "file" if found == 1 else "files"
            short.append(f"{pattern!r} matched {found} {noun}, need at least {min_count}")
    return short


def _count(workdir: str, pattern: str) -> int:
    return len(glob.glob(pattern, root_dir=workdir, recursive=True))
