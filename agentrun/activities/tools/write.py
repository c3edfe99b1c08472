"""write {path, content}: make or replace a file; missing folders on the way are made."""

from __future__ import annotations

import asyncio
import os

from agentrun.activities.tools.base import Refused, ToolContext
from agentrun.activities.tools.paths import locate, open_for_writing
from agentrun.models.builtin_tools import WriteArgs


async def call(ctx: ToolContext, args: WriteArgs) -> str:
    return await asyncio.to_thread(_write, ctx, args.path, args.content)


def _write(ctx: ToolContext, path: str, content: str) -> str:
    data = content.encode("utf-8")
    if len(data) > ctx.policy.limits.file_bytes:
        raise Refused(
            f"{len(data)} bytes is more than the policy's largest file ({ctx.policy.limits.file_bytes} bytes)"
        )
    with locate(ctx, path, make_parents=True) as found:
        fd = open_for_writing(found, path, create=True)
    with os.fdopen(fd, "wb") as f:
        f.truncate(0)
        f.write(data)
    return "ok"
