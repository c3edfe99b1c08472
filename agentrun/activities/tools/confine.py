"""Paths that stay inside the run's work directory, checked at the moment of access.

A path is resolved one component at a time, each directory opened relative to the one before it
(`openat`) with O_NOFOLLOW, and `..` taken off the path walked so far, never asked of the kernel.
A symbolic link is read and its target walked in turn: a target inside the work directory is
followed, one outside it refuses the call. Since every open is relative to a directory already
held and never follows a link, a link swapped in after the check (a directory or the file itself
replaced by a link to /etc) makes the open fail instead of escaping: there is no gap between the
check and the use.
"""

from __future__ import annotations

import errno
import os
import stat
from collections import deque
from dataclasses import dataclass, field

MAX_LINKS = 40  # as the kernel's own limit on links followed in one path
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class OutsideWorkdir(Exception):
    """The path, or a link on it, leads outside the work directory."""


class NotFound(Exception):
    """A component of the path does not exist (the path as the model gave it is in the message)."""


class Changed(Exception):
    """The path changed while it was being walked (a directory replaced by a link)."""


@dataclass
class Located:
    """Where a path ends: the directory that holds it (an open descriptor, closed by close()), the
    last component's name in it, and the path relative to the work directory. `name` is "" when the
    path is the work directory itself; `exists` says whether the last component is there."""

    parent_fd: int
    name: str
    parts: list[str]
    exists: bool
    _fds: list[int] = field(default_factory=list)

    @property
    def rel(self) -> str:
        return "/".join(self.parts) or "."

    def open(self, flags: int, mode: int = 0o644) -> int:
        """Open the last component without following a link: a link put there since the walk
        fails with ELOOP (Changed) rather than being followed."""
        if not self.name:
            return os.dup(self.parent_fd) if flags & os.O_DIRECTORY else os.open(".", flags, dir_fd=self.parent_fd)
        try:
            return os.open(self.name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=self.parent_fd)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise Changed(self.rel) from e
            raise

    def close(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds.clear()

    def __enter__(self) -> Located:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class Workdir:
    """The run's work directory, held open: every path a tool touches resolves inside it."""

    def __init__(self, path: str):
        self.root = os.path.realpath(path)
        self.fd = os.open(self.root, _DIR_FLAGS)

    def close(self) -> None:
        os.close(self.fd)

    def __enter__(self) -> Workdir:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def parts(self, path: str) -> list[str]:
        """The components of a path the model gave, relative to the work directory: an absolute
        path must name a place inside it."""
        if os.path.isabs(path):
            inside = self.inside(path)
            if inside is None:
                raise OutsideWorkdir(path)
            return inside
        return [p for p in path.split("/") if p not in ("", ".")]

    def inside(self, absolute: str) -> list[str] | None:
        """An absolute path's components below the work directory, or None when it is elsewhere.
        Lexical: what the components then are is for the walk to find out."""
        normal = os.path.normpath(absolute)
        if normal == self.root:
            return []
        if not normal.startswith(self.root.rstrip("/") + "/"):
            return None
        return [p for p in normal[len(self.root) :].split("/") if p]

    def locate(self, path: str, *, make_parents: bool = False) -> Located:
        """Walk `path` inside the work directory, links followed while they stay inside. The last
        component may be missing (a file to create); a missing directory on the way is made when
        make_parents, else NotFound."""
        pending = deque(self.parts(path))
        fds = [os.dup(self.fd)]
        names: list[str] = []
        links = 0
        try:
            while pending:
                part = pending.popleft()
                if part in ("", "."):
                    continue
                if part == "..":
                    if not names:
                        raise OutsideWorkdir(path)
                    os.close(fds.pop())
                    names.pop()
                    continue
                here = fds[-1]
                last = not pending
                try:
                    info = os.stat(part, dir_fd=here, follow_symlinks=False)
                except FileNotFoundError:
                    if last:
                        return Located(here, part, [*names, part], False, fds)
                    if not make_parents:
                        raise NotFound(path) from None
                    os.mkdir(part, 0o755, dir_fd=here)
                    info = os.stat(part, dir_fd=here, follow_symlinks=False)
                if stat.S_ISLNK(info.st_mode):
                    links += 1
                    if links > MAX_LINKS:
                        raise OutsideWorkdir(f"{path} (too many links)")
                    target = os.readlink(part, dir_fd=here)
                    if os.path.isabs(target):
                        inside = self.inside(target)
                        if inside is None:
                            raise OutsideWorkdir(path)
                        for fd in fds[1:]:
                            os.close(fd)
                        del fds[1:]
                        names.clear()
                        pending.extendleft(reversed(inside))
                    else:
                        pending.extendleft(reversed(target.split("/")))
                    continue
                if last:
                    return Located(here, part, [*names, part], True, fds)
                if not stat.S_ISDIR(info.st_mode):
                    raise NotFound(path)
                try:
                    fds.append(os.open(part, _DIR_FLAGS, dir_fd=here))
                except OSError as e:
                    # ELOOP or ENOTDIR: replaced by a link or a file since the stat just above.
                    raise Changed(path) from e
                names.append(part)
            return Located(fds[-1], "", names, True, fds)
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
