"""ls {path}: a folder's entries, each {name, is_dir, size}; secret files are left out."""

from __future__ import annotations

import asyncio
import os
import stat
from typing import Any

from agentrun.activities.tools.base import ToolContext, ToolFailed, as_json
from agentrun.activities.tools.paths import locate, open_dir
from agentrun.activities.tools.policy import is_secret
from agentrun.models.builtin_tools import LsArgs

MAX_ENTRIES = 2000


async def call(ctx: ToolContext, args: LsArgs) -> str:
    return await asyncio.to_thread(_ls, ctx, args.path)


def _ls(ctx: ToolContext, path: str) -> str:
    entries: list[dict[str, Any]] = []
    with locate(ctx, path or ".") as found:
        if not found.exists:
            raise ToolFailed(f"{path}: no such directory")
        fd = open_dir(found, path)
        prefix = "" if found.rel == "." else found.rel + "/"
        try:
            with os.scandir(fd) as listing:
                for entry in sorted(listing, key=lambda e: e.name):
                    if is_secret(prefix + entry.name, ctx.policy):
                        continue
                    # The entry itself, a link as a link: listing never follows one out.
                    info = entry.stat(follow_symlinks=False)
                    entries.append({"name": entry.name, "is_dir": stat.S_ISDIR(info.st_mode), "size": info.st_size})
                    if len(entries) >= MAX_ENTRIES:
                        break
        finally:
            os.close(fd)
    return as_json(entries)
