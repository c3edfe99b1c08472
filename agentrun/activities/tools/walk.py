"""Walking a folder of the work directory without following links: for glob and grep."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

from agentrun.activities.tools.confine import _DIR_FLAGS

MAX_VISITED = 50_000  # entries one call looks at, at most: a huge tree ends the walk, not the worker


@dataclass(frozen=True)
class Entry:
    rel: str  # from the work directory
    name: str
    dir_fd: int  # the folder that holds it, open while the entry is handled
    is_dir: bool
    is_link: bool


class Walk:
    """Entries below an open folder, depth first, names sorted; links are reported, not followed."""

    def __init__(self, max_depth: int | None = None):
        self.max_depth = max_depth
        self.visited = 0
        self.cut = False  # the walk stopped at MAX_VISITED

    def below(self, fd: int, prefix: str, depth: int = 1) -> Iterator[Entry]:
        with os.scandir(fd) as listing:
            entries = sorted(listing, key=lambda e: e.name)
        for entry in entries:
            self.visited += 1
            if self.visited > MAX_VISITED:
                self.cut = True
                return
            rel = f"{prefix}{entry.name}"
            is_link = entry.is_symlink()
            is_dir = not is_link and entry.is_dir(follow_symlinks=False)
            yield Entry(rel, entry.name, fd, is_dir, is_link)
            if is_dir and (self.max_depth is None or depth < self.max_depth):
                try:
                    child = os.open(entry.name, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    continue  # gone, replaced by a link, or unreadable: nothing to list there
                try:
                    yield from self.below(child, rel + "/", depth + 1)
                finally:
                    os.close(child)
                if self.cut:
                    return
