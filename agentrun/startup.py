"""Python's cyclic garbage collector while a command loads what serves a run.

Loading Temporal's SDK, the workflows and the activities, and building the models' schemas,
allocates a few hundred thousand objects that live as long as the process; the collector walks
them again and again while they pile up (≈ 40 ms of `start` before its first prompt). Inside
`loading()` nothing is collected; after it, what was loaded is frozen, so later collections skip
it, and collecting goes on as before.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def loading() -> Iterator[None]:
    if not gc.isenabled():  # an outer block, or a program that runs without the collector
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()
