"""The files no tool touches: `is_protected`, by name anywhere (agent.toml, .env, ...) or as the
policy's `protected_files` name them. Whether a call may run at all under the rest of policy.toml
(`enabled`, path globs, bash's lists, `allow_domains`, `[mcp]`) is agentrun.policy's to decide; the
file is read once, by a spec's compiler (lang.grants.read_policy), into the ToolPolicy in
models.tool_policy.
"""

from __future__ import annotations

import fnmatch

from agentrun.models.tools import PROTECTED_FILES, ToolPolicy


def is_protected(policy: ToolPolicy, rel: str) -> bool:
    """A file no tool writes, edits, reads or lists: by its name anywhere (agent.toml, .env, ...),
    or one the policy's protected_files names (a name or glob, or a path from the work directory)."""
    name = rel.rsplit("/", 1)[-1]
    if name in PROTECTED_FILES:
        return True
    for entry in policy.protected_files:
        entry = entry.removeprefix("$WORKSPACE/").removeprefix("./")
        target = rel if "/" in entry else name
        if fnmatch.fnmatchcase(target, entry):
            return True
    return False
