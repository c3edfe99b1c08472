"""The folders a load may read files from, when whoever asks for the load is not the person at this
machine: the MCP server, whose agent names tree files and whose trees name `$ref`s. Outside a
`within(...)` block every path may be read, as on the command line.

A path is judged by where it really is (symlinks followed), so a link inside a root that leads out
of it is outside. It is judged before anything is read or listed, so the refusal says the same for a
file that exists and one that does not.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from contextvars import ContextVar

_roots: ContextVar[tuple[str, ...] | None] = ContextVar("agentrun_read_roots", default=None)

HINT = "keep the tree and its fragments under the folder the MCP server was started in (or a root its client declares)"


@contextlib.contextmanager
def within(roots: Iterable[str]) -> Iterator[None]:
    """Loads in this block read only files under `roots`."""
    token = _roots.set(tuple(os.path.realpath(root) for root in roots))
    try:
        yield
    finally:
        _roots.reset(token)


def outside(path: str) -> bool:
    """Whether `path` is outside the roots of the load in progress (never, outside `within`)."""
    roots = _roots.get()
    if roots is None:
        return False
    real = os.path.realpath(path)
    return not any(real == root or real.startswith(root.rstrip(os.sep) + os.sep) for root in roots)
