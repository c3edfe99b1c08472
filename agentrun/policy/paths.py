"""A path tool's `allow` / `deny` globs, as the Agentfile's real system matches them: `$WORKSPACE` and
`~` expanded at a pattern's start, `**` any depth, `*` within one folder; deny first, then allow
(with an allow list, a path must match it); under `default_deny` a path no allow list names is
refused. Text only: which file a path is, inside the work directory, the tool finds out (its
confinement); the tool asks again with the path it found."""

from __future__ import annotations

import os
import re

from agentrun.models.tools import ToolPolicy
from agentrun.policy.globs import glob_regex

# glob and grep read what they find, so they answer to read's globs too, as in the real system.
READERS = ("glob", "grep")


def refusal(policy: ToolPolicy, tool: str, path: str, workdir: str) -> str | None:
    """Why the policy's globs keep `tool` from `path` (absolute, or relative to `workdir`), or None."""
    absolute = os.path.normpath(os.path.join(workdir, path))
    for name in (tool, "read") if tool in READERS else (tool,):
        reason = _refusal(policy, name, absolute, workdir)
        if reason:
            return reason
    return None


def _refusal(policy: ToolPolicy, tool: str, absolute: str, workspace: str) -> str | None:
    rule = policy.rule(tool)
    if not rule.enabled:
        return f"tool {tool} is disabled by the policy"
    for pattern in rule.deny:
        if match_path(expand(pattern, workspace), absolute):
            return f"path {absolute} matches the policy's deny pattern {pattern}"
    if rule.allow:
        if any(match_path(expand(pattern, workspace), absolute) for pattern in rule.allow):
            return None
        return f"path {absolute} is not in the policy's allow list for {tool}"
    if policy.default_deny:
        return f"path {absolute} is not in an allow list (default_deny = true)"
    return None


def expand(pattern: str, workspace: str, home: str = "") -> str:
    """$WORKSPACE and ~ at the start of a pattern, as the real system expands them (`~` to `home`,
    else the worker's home: read only for a pattern that names it)."""
    if pattern.startswith("$WORKSPACE"):
        pattern = workspace + pattern[len("$WORKSPACE") :]
    if pattern.startswith("~"):
        pattern = (home or os.path.expanduser("~")) + pattern[1:]
    return pattern


def match_path(pattern: str, path: str) -> bool:
    """The real system's path match: `**` takes any depth (prefix, then the rest's end or base
    name); otherwise one glob over the whole path, `*` not crossing a `/`."""
    pattern, path = os.path.normpath(pattern), os.path.normpath(path)
    if "**" in pattern:
        prefix, _, suffix = pattern.partition("**")
        prefix, suffix = prefix.rstrip("/"), suffix.lstrip("/")
        if prefix and not path.startswith(prefix):
            return False
        remaining = path[len(prefix) :].lstrip("/") if prefix else path
        if not suffix or remaining.endswith(suffix):
            return True
        return _glob_match(suffix, os.path.basename(remaining))
    return _glob_match(pattern, path)


def _glob_match(pattern: str, path: str) -> bool:
    """Go's filepath.Match: `*` and `?` never match `/`."""
    return re.fullmatch(glob_regex(pattern), path) is not None
