"""edit {path, old, new}: replace the first exact occurrence of `old`; the file and the text must
be there (edit never makes a file)."""

from __future__ import annotations

import asyncio
import os

from agentrun.activities.tools.base import Refused, ToolContext, ToolFailed
from agentrun.activities.tools.paths import locate, open_for_writing
from agentrun.models.builtin_tools import EditArgs


async def call(ctx: ToolContext, args: EditArgs) -> str:
    path, old, new = args.path, args.old, args.new
    return await asyncio.to_thread(_edit, ctx, path, old, new)


def _edit(ctx: ToolContext, path: str, old: str, new: str) -> str:
    if not old:
        raise ToolFailed("argument 'old' is empty: give the exact text to replace")
    with locate(ctx, path) as found:
        if not found.exists:
            raise ToolFailed(f"{path}: no such file (edit changes a file that is there; use write to make one)")
        fd = open_for_writing(found, path, create=False)
    with os.fdopen(fd, "r+b") as f:
        limit = ctx.policy.limits.file_bytes
        data = f.read(limit + 1)
        if len(data) > limit:
            raise Refused(f"{path} is larger than the policy's largest file ({limit} bytes)")
        text = data.decode("utf-8", errors="surrogateescape")
        if old not in text:
            raise ToolFailed(f"the text to replace was not found in {path}")
        changed = text.replace(old, new, 1).encode("utf-8", errors="surrogateescape")
        if len(changed) > limit:
            raise Refused(f"the edited {path} would be larger than the policy's largest file ({limit} bytes)")
        f.seek(0)
        f.truncate(0)
        f.write(changed)
    return "ok"
