"""The checks every path tool makes before it touches a file: the confinement, the protected
files and the policy's allow/deny globs, in one place, with the reason the model reads."""

from __future__ import annotations

import os
import stat

from agentrun.activities.tools.base import Refused, ToolContext, ToolFailed
from agentrun.activities.tools.confine import Changed, Located, NotFound, OutsideWorkdir
from agentrun.activities.tools.policy import is_protected, is_secret
from agentrun.policy import Asked, decide

WRITING = ("write", "edit")  # the tools that change a file: they answer to the protected list


def locate(ctx: ToolContext, path: str, *, make_parents: bool = False) -> Located:
    """Resolve `path` for ctx's tool inside the work directory, links followed, or refuse."""
    if not path:
        raise ToolFailed("the path is empty")
    if "\0" in path:
        raise Refused("a path may not contain a NUL character")
    try:
        found = ctx.workdir.locate(path, make_parents=make_parents)
    except OutsideWorkdir:
        raise Refused(f"path {path} is outside the work directory; use a path inside it") from None
    except NotFound:
        raise ToolFailed(f"{path}: no such file or directory") from None
    except Changed:
        raise Refused(f"path {path} changed while it was being checked (a link was put in its way)") from None
    except NotADirectoryError:
        raise ToolFailed(f"{path}: a component of the path is not a directory") from None
    try:
        allowed(ctx, found.rel, shown=path)
    except BaseException:
        found.close()
        raise
    return found


def allowed(ctx: ToolContext, rel: str, *, shown: str) -> None:
    """Refuse a secret file to any tool, a protected one to a tool that writes, or a path the
    policy's globs keep from this tool."""
    if is_secret(rel, ctx.policy):
        raise Refused(f"{shown} is a secret file: no tool reads, writes or lists it")
    if ctx.name in WRITING and is_protected(ctx.policy, rel):
        raise Refused(
            f"{shown} steers this run or the next one (its spec, policy or configuration): agents may read it, "
            "not change it"
        )
    reason = path_refusal(ctx, rel)
    if reason:
        raise Refused(reason)


def path_refusal(ctx: ToolContext, rel: str) -> str | None:
    """Why the policy's allow/deny globs keep ctx's tool from `rel`, or None (glob and grep answer
    to read's globs too: agentrun.policy decides)."""
    decision = decide(ctx.policy, Asked("builtin", ctx.name, {"path": rel}, workdir=ctx.workdir.root))
    return decision.reason if decision.refused else None


def open_regular(found: Located, path: str, flags: int, mode: int = 0o644) -> int:
    """Open the file `found` names, a regular one (not a device, a pipe or a directory), without
    blocking on a FIFO and without following a link put there since the walk."""
    try:
        fd = found.open(flags | os.O_NONBLOCK, mode)
    except Changed:
        raise Refused(f"path {path} changed while it was being checked (a link was put in its way)") from None
    except IsADirectoryError:
        raise ToolFailed(f"{path} is a directory") from None
    except OSError as e:
        raise ToolFailed(f"{path}: {e.strerror}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise ToolFailed(f"{path} is not a regular file")
    os.set_blocking(fd, True)
    return fd


def open_for_reading(found: Located, path: str) -> int:
    """Open a regular file to read it. A file with other hard links is refused, as for writing: one
    of them may be outside the work directory (a link made by a command to a file of the machine's)."""
    fd = open_regular(found, path, os.O_RDONLY)
    if os.fstat(fd).st_nlink > 1:
        os.close(fd)
        raise Refused(f"{path} has other hard links, which may lead outside the work directory")
    return fd


def open_for_writing(found: Located, path: str, *, create: bool) -> int:
    """Open a regular file to change it in place. A file with other hard links is refused: one of
    them may be outside the work directory (a link made by a command to /etc/passwd)."""
    flags = os.O_WRONLY | os.O_CREAT if create else os.O_RDWR
    fd = open_regular(found, path, flags)
    if os.fstat(fd).st_nlink > 1:
        os.close(fd)
        raise Refused(f"{path} has other hard links, which may lead outside the work directory")
    return fd


def open_dir(found: Located, path: str) -> int:
    """Open the directory `found` names, without following a link put there since the walk."""
    try:
        return found.open(os.O_RDONLY | os.O_DIRECTORY)
    except Changed:
        raise Refused(f"path {path} changed while it was being checked (a link was put in its way)") from None
    except NotADirectoryError:
        raise ToolFailed(f"{path} is not a directory") from None
    except OSError as e:
        raise ToolFailed(f"{path}: {e.strerror}") from None
