"""A reply let out piece by piece, each next piece when the test says so, so a test can look at a
call while it is half written without sleeping.

    drip = server.drip("coder")      # the first piece goes at once, the others wait
    drip.wait_sent(1)                # (test side) the first piece is out
    drip.allow(1)                    # one more may go
    drip.allow_all()                 # the rest, and every later reply, go at once
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable

ALL = 1 << 30
MAX_PIECES = 4096  # a longer reply goes in pieces of several words each


def pieces(text: str) -> list[str]:
    """The text cut before each word that follows whitespace: joined, the same text. A reply of
    more words than MAX_PIECES (a test's multi-megabyte output) is cut into MAX_PIECES pieces of
    several words, as a server may send several tokens per event: a word per event would make
    its millions of events the test's cost, not what it tests."""
    words = re.split(r"(?<=\s)(?=\S)", text) or [""]
    if len(words) <= MAX_PIECES:
        return words
    size = -(-len(words) // MAX_PIECES)
    return ["".join(words[i : i + size]) for i in range(0, len(words), size)]


class Drip:
    def __init__(self, first: int = 1) -> None:
        self._changed = threading.Condition()
        self.allowed = first
        self.sent = 0

    def allow(self, count: int = 1) -> None:
        with self._changed:
            self.allowed += count
            self._changed.notify_all()

    def allow_all(self) -> None:
        self.allow(ALL)

    def wait_sent(self, count: int, timeout_s: float = 60.0) -> None:
        """Until `count` pieces have gone out (across every reply this drip paced)."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while self.sent < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"only {self.sent} of {count} pieces were sent")
                self._changed.wait(left)

    def turn(self, gone: Callable[[], bool]) -> bool:
        """(server side) Wait until the next piece may go and count it; False if the client left."""
        with self._changed:
            while self.sent >= self.allowed:
                if gone():
                    return False
                self._changed.wait(0.05)
            self.sent += 1
            self._changed.notify_all()
            return True
