"""grep {pattern, path}: the lines that match a regular expression in a file, or in every file of
a folder, each {file, line, content}; secret files and files with other hard links are left out,
links are not followed.

The expression runs under a time limit (the `regex` module's timeout): a pattern that backtracks
forever on a long line ends the call with an error, not a worker thread.
"""

from __future__ import annotations

import asyncio
import os
import stat
import time
from typing import Any

import regex

from agentrun.activities.tools.base import ToolContext, ToolFailed, as_json
from agentrun.activities.tools.paths import locate, open_for_reading, path_refusal
from agentrun.activities.tools.policy import is_secret
from agentrun.activities.tools.walk import Walk
from agentrun.models.builtin_tools import GrepArgs

MAX_MATCHES = 1000
MAX_FILE_BYTES = 10 << 20  # larger files are skipped, as are binary ones
MAX_LINE_CHARS = 500  # a matching line is shown up to this long
TIME_LIMIT_S = 20.0


async def call(ctx: ToolContext, args: GrepArgs) -> str:
    pattern, path = args.pattern, args.path
    return await asyncio.to_thread(_grep, ctx, pattern, path or ".")


def _grep(ctx: ToolContext, pattern: str, path: str) -> str:
    try:
        expression = regex.compile(pattern)
    except regex.error as e:
        raise ToolFailed(f"invalid regular expression: {e}") from None
    search = _Search(ctx, expression)
    with locate(ctx, path) as found:
        if not found.exists:
            raise ToolFailed(f"{path}: no such file or directory")
        fd = found.open(os.O_RDONLY | os.O_NONBLOCK)
        try:
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                prefix = "" if found.rel == "." else found.rel + "/"
                for entry in Walk().below(fd, prefix):
                    if entry.is_dir or entry.is_link or not search.wanted(entry.rel):
                        continue
                    try:
                        file_fd = os.open(entry.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=entry.dir_fd)
                    except OSError:
                        continue
                    search.file(file_fd, entry.rel)
                    if search.full:
                        break
            else:
                os.close(fd)
                fd = open_for_reading(found, path)
                search.file(fd, found.rel)
        finally:
            try:
                os.close(fd)
            except OSError:
                pass
    return as_json(search.matches)


class _Search:
    def __init__(self, ctx: ToolContext, expression: regex.Pattern[str]):
        self.ctx = ctx
        self.expression = expression
        self.matches: list[dict[str, Any]] = []
        self.deadline = time.monotonic() + TIME_LIMIT_S

    @property
    def full(self) -> bool:
        return len(self.matches) >= MAX_MATCHES

    def wanted(self, rel: str) -> bool:
        if is_secret(rel, self.ctx.policy):
            return False
        return path_refusal(self.ctx, rel) is None

    def file(self, fd: int, rel: str) -> None:
        """Search one open file (the descriptor is closed here); a binary or huge file is skipped."""
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(f.fileno())
            # A file with other hard links may be one outside the work directory: not read.
            if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FILE_BYTES or info.st_nlink > 1:
                return
            data = f.read(MAX_FILE_BYTES)
        if b"\0" in data[:8192]:
            return
        for number, line in enumerate(data.decode("utf-8", errors="replace").split("\n"), 1):
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                raise ToolFailed(
                    f"the search took longer than {TIME_LIMIT_S:g}s; try a simpler pattern or a smaller folder"
                )
            try:
                hit = self.expression.search(line, timeout=remaining)
            except TimeoutError:
                raise ToolFailed(
                    f"the search took longer than {TIME_LIMIT_S:g}s; try a simpler pattern or a smaller folder"
                ) from None
            if hit:
                self.matches.append({"file": rel, "line": number, "content": line[:MAX_LINE_CHARS]})
                if self.full:
                    return
