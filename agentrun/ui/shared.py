"""One look at Temporal per moment, however many open pages ask: each page's event stream asks every
second, and without this every open page queried every waiting run on its own."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

FORGET_S = 60.0  # an answer nobody asked for in this long is dropped (a run's page was closed)


class Shared:
    """The answer of `read` under `key`, asked again only when the last one is older than max_age_s;
    callers that come while it is being asked wait for that answer. A failure is not kept."""

    def __init__(self, max_age_s: float) -> None:
        self.max_age_s = max_age_s
        self._answers: dict[str, tuple[float, Any]] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def get(self, key: str, read: Callable[[], Awaitable[Any]]) -> Any:
        async with self._locks.setdefault(key, asyncio.Lock()):
            kept = self._answers.get(key)
            if kept is not None and time.monotonic() - kept[0] < self.max_age_s:
                return kept[1]
            value = await read()
            self._forget_old()
            self._answers[key] = (time.monotonic(), value)
            return value

    def _forget_old(self) -> None:
        now = time.monotonic()
        for key in [k for k, (at, _) in self._answers.items() if now - at > FORGET_S]:
            del self._answers[key]
            lock = self._locks.get(key)
            if lock is not None and not lock.locked():
                del self._locks[key]
