"""What finished nodes returned, by where they ran, so a run that continues as new walks its plan
again to where it was without running anything twice.

A path names one run of a node: its parents' run keys and loop rounds (`/build/polish@3/review`).
A node that finishes is kept under its path, and what ran inside it is dropped, since the walk
will not go inside it again: the journal holds the finished children of what is still running,
and stays the size of the plan, not of the run. Marks beside a node's path (`#round`, `#gate`)
say where it was inside itself.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from typing import Any

_INSIDE = "#/@"  # what follows a path in the keys under it: a mark, a child, a loop round
# Each separator and the character after it: the keys under `path` + separator sort below path + next.
_RANGES = tuple((separator, chr(ord(separator) + 1)) for separator in _INSIDE)


class Journal:
    def __init__(self, entries: dict[str, Any] | None = None) -> None:
        self.entries: dict[str, Any] = dict(entries or {})
        self._keys = sorted(self.entries)  # so the keys under a path are a few ranges, found by bisection

    def has(self, path: str) -> bool:
        return path in self.entries

    def get(self, path: str, default: Any = None) -> Any:
        return self.entries.get(path, default)

    def mark(self, key: str, value: Any) -> None:
        if key not in self.entries:
            insort(self._keys, key)
        self.entries[key] = value

    def done(self, path: str, value: Any) -> None:
        """The node at `path` finished with `value`."""
        self.forget_under(path)
        self.mark(path, value)

    def resuming(self, path: str) -> bool:
        """Whether the node at `path` was under way when the run continued as new: something it ran,
        or a mark of where it was, is kept under it."""
        keys = self._keys
        for separator, after in _RANGES:
            if bisect_left(keys, path + separator) < bisect_left(keys, path + after):
                return True
        return False

    def forget_under(self, path: str) -> None:
        keys = self._keys
        for separator, after in _RANGES:
            lo, hi = bisect_left(keys, path + separator), bisect_left(keys, path + after)
            if lo < hi:
                for key in keys[lo:hi]:
                    del self.entries[key]
                del keys[lo:hi]
