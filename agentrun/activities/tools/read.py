"""read {path}: a file's content."""

from __future__ import annotations

import asyncio
import os

from agentrun.activities.tools.base import ToolContext, ToolFailed
from agentrun.activities.tools.paths import locate, open_for_reading
from agentrun.models.builtin_tools import ReadArgs


async def call(ctx: ToolContext, args: ReadArgs) -> str:
    return await asyncio.to_thread(_read, ctx, args.path)


def _read(ctx: ToolContext, path: str) -> str:
    with locate(ctx, path) as found:
        if not found.exists:
            raise ToolFailed(f"{path}: no such file")
        fd = open_for_reading(found, path)
        with os.fdopen(fd, "rb") as f:
            # At most 4 bytes a character: enough to fill the output cap and see that it is cut.
            data = f.read(ctx.output_chars * 4 + 4)
    return data.decode("utf-8", errors="replace")
