"""glob {pattern}: the paths in the work directory that match (`*`, `?`, `[..]`, `**` for any depth,
`{a,b}`), relative to it; secret files and links that lead outside are left out."""

from __future__ import annotations

import asyncio
import os
import re

from agentrun.activities.tools.base import Refused, ToolContext, ToolFailed, as_json
from agentrun.activities.tools.confine import Changed, NotFound, OutsideWorkdir
from agentrun.activities.tools.paths import locate, path_refusal
from agentrun.activities.tools.policy import is_secret
from agentrun.activities.tools.walk import Walk
from agentrun.models.builtin_tools import GlobArgs
from agentrun.policy.globs import glob_regex

MAX_RESULTS = 1000


async def call(ctx: ToolContext, args: GlobArgs) -> str:
    return await asyncio.to_thread(_glob, ctx, args.pattern)


def _glob(ctx: ToolContext, pattern: str) -> str:
    parts = _parts(ctx, pattern)
    fixed = _fixed_prefix(parts)
    rest = parts[len(fixed) :]
    matcher = re.compile(_regex(parts))
    depth = None if any("**" in p for p in rest) else len(rest)
    found: list[str] = []
    walk = Walk(max_depth=depth)
    try:
        start = locate(ctx, "/".join(fixed) or ".")
    except ToolFailed:  # a folder of the pattern is not there: nothing matches
        return as_json([])
    with start:
        if not start.exists:
            return as_json([])
        if not rest:  # no wildcard at all: the path itself
            return as_json([start.rel])
        try:
            fd = start.open(os.O_RDONLY | os.O_DIRECTORY)
        except (Changed, OSError):
            return as_json([])
        prefix = "" if start.rel == "." else start.rel + "/"
        try:
            for entry in walk.below(fd, prefix):
                if matcher.fullmatch(entry.rel) and _shown(ctx, entry.rel, entry.is_link):
                    found.append(entry.rel)
                    if len(found) >= MAX_RESULTS:
                        break
        finally:
            os.close(fd)
    return as_json(found)


def _parts(ctx: ToolContext, pattern: str) -> list[str]:
    if not pattern.strip():
        raise ToolFailed("the pattern is empty")
    if os.path.isabs(pattern):
        inside = ctx.workdir.inside(pattern)
        if inside is None:
            raise Refused(f"pattern {pattern} is outside the work directory; give one relative to it")
        return inside
    parts = [p for p in pattern.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise Refused(f"pattern {pattern} leaves the work directory (`..`); give one inside it")
    return parts


def _fixed_prefix(parts: list[str]) -> list[str]:
    fixed: list[str] = []
    for part in parts:
        if re.search(r"[*?\[{]", part):
            break
        fixed.append(part)
    return fixed


def _shown(ctx: ToolContext, rel: str, is_link: bool) -> bool:
    """Whether a match is listed: not secret, allowed by the policy's globs for glob, and for a
    link, one that resolves inside the work directory to something that is itself shown."""
    if is_secret(rel, ctx.policy):
        return False
    if path_refusal(ctx, rel):
        return False
    if not is_link:
        return True
    try:
        with ctx.workdir.locate(rel) as target:
            return target.exists and not is_secret(target.rel, ctx.policy)
    except (OutsideWorkdir, NotFound, Changed, OSError):
        return False


def _regex(parts: list[str]) -> str:
    pieces: list[str] = []
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if part == "**":
            pieces.append(".*" if last else "(?:[^/]+/)*")
            continue
        pieces.append(glob_regex(part, braces=True) + ("" if last else "/"))
    return "".join(pieces)
