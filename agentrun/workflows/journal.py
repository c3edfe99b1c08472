"""What finished nodes returned, by where they ran, so a run that continues as new walks its plan
again to where it was without running anything twice.

A path names one run of a node: its parents' run keys and loop rounds (`/build/polish@3/review`).
A node that finishes is kept under its path, and what ran inside it is dropped, since the walk
will not go inside it again: the journal holds the finished children of what is still running,
and stays the size of the plan, not of the run.
"""

from __future__ import annotations

from typing import Any

_INSIDE = "/@#"  # what follows a path in the paths under it: a child, a loop round, a resume point


class Journal:
    def __init__(self, entries: dict[str, Any] | None = None) -> None:
        self.entries: dict[str, Any] = dict(entries or {})

    def has(self, path: str) -> bool:
        return path in self.entries

    def get(self, path: str) -> Any:
        return self.entries[path]

    def resuming(self, path: str) -> bool:
        """Whether the node at `path` was under way when the run continued as new."""
        return any(_under(key, path) for key in self.entries)

    def done(self, path: str, value: Any) -> None:
        """The node at `path` finished with `value`."""
        self.forget_under(path)
        self.entries[path] = value

    def forget_under(self, path: str) -> None:
        for key in [k for k in self.entries if _under(k, path)]:
            del self.entries[key]


def _under(key: str, path: str) -> bool:
    return len(key) > len(path) and key.startswith(path) and key[len(path)] in _INSIDE
