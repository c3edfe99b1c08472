"""The checks a tool call's ToolPolicy is held to, as the Agentfile's real system makes them.

The policy.toml: a top-level `default_deny`; one table per tool (`[read]`, `[bash]`, ...) with
`enabled`, `allow` / `deny` path globs (`$WORKSPACE` and `~` expanded, `**` recursive, deny wins),
bash's `allowlist` / `denylist` and `timeout`, web tools' `allow_domains`; `[mcp]` with
`default_deny` and `allowed_tools = ["server:tool"]`. A tool with a table is enabled unless it says
otherwise; a tool without one is enabled unless `default_deny`. Under `default_deny` a path tool
refuses every path its `allow` does not name.

Our own keys, which the real system ignores: top-level `protected_files` (more names or paths never
written, edited, read or listed) and `max_output` (characters a result gives back); in `[bash]`
`max_processes`, `max_memory_mb`, `max_file_mb`; in `[web_fetch]` `allow_private`.

The file is read once, by a spec's compiler (lang.grants.read_policy, which refuses an unknown key
or a value of the wrong type), and becomes the ToolPolicy in models.tool_policy.
"""

from __future__ import annotations

import fnmatch
import os
import re

from agentrun.activities.tools.globs import glob_regex
from agentrun.models.tools import PROTECTED_FILES, ToolPolicy


def is_enabled(policy: ToolPolicy, tool: str) -> bool:
    return policy.rule(tool).enabled


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


def is_secret(rel: str) -> bool:
    """A protected file whose text itself is a secret (credentials.toml, .env, .env.local): the
    bash sandbox shows it empty, where other protected files are read-only."""
    name = rel.rsplit("/", 1)[-1].lower()
    return name == "credentials.toml" or name.startswith(".env")


def check_path(policy: ToolPolicy, tool: str, absolute: str, workspace: str) -> str | None:
    """Why `tool` may not touch `absolute` under the policy's allow/deny globs, or None."""
    rule = policy.rule(tool)
    if not rule.enabled:
        return f"tool {tool} is disabled by the policy"
    home = os.path.expanduser("~")
    for pattern in rule.deny:
        if match_path(expand(pattern, workspace, home), absolute):
            return f"path {absolute} matches the policy's deny pattern {pattern}"
    if rule.allow:
        if any(match_path(expand(pattern, workspace, home), absolute) for pattern in rule.allow):
            return None
        return f"path {absolute} is not in the policy's allow list for {tool}"
    if policy.default_deny:
        return f"path {absolute} is not in an allow list (default_deny = true)"
    return None


def expand(pattern: str, workspace: str, home: str) -> str:
    """$WORKSPACE and ~ at the start of a pattern, as the real system expands them."""
    if pattern.startswith("$WORKSPACE"):
        pattern = workspace + pattern[len("$WORKSPACE") :]
    if pattern.startswith("~"):
        pattern = home + pattern[1:]
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


def check_domain(policy: ToolPolicy, tool: str, host: str) -> str | None:
    """Why `tool` may not reach `host` under `allow_domains`, or None (no list: any host)."""
    rule = policy.rule(tool)
    if not rule.enabled:
        return f"tool {tool} is disabled by the policy"
    if not rule.allow_domains:
        return None
    host = host.lower().rstrip(".")
    for pattern in rule.allow_domains:
        pattern = pattern.lower()
        if pattern == "*" or pattern == host:
            return None
        if pattern.startswith("*.") and (host.endswith(pattern[1:]) or host == pattern[2:]):
            return None
    return f"domain {host} is not in the policy's allow_domains for {tool}"


def check_mcp_tool(policy: ToolPolicy, server: str, tool: str) -> tuple[str | None, str]:
    """(why the MCP tool is refused or None, a warning): as the real system, a policy without
    [mcp] allows every tool and warns; `[mcp] default_deny` allows only `allowed_tools`."""
    if policy.mcp is None:
        return None, "the policy has no [mcp] table: every MCP tool is allowed"
    if not policy.mcp.default_deny:
        return None, ""
    for pattern in policy.mcp.allowed_tools:
        wanted_server, sep, wanted_tool = pattern.partition(":")
        if not sep:
            if pattern == f"{server}:{tool}":
                return None, ""
            continue
        if wanted_server in ("*", server) and wanted_tool in ("*", tool):
            return None, ""
    return f"MCP tool {server}:{tool} is not in the policy's [mcp] allowed_tools", ""
