"""policy.toml, read as the Agentfile's real system reads it, and the checks made against it.

The file: a top-level `default_deny`; one table per tool (`[read]`, `[bash]`, ...) with `enabled`,
`allow` / `deny` path globs (`$WORKSPACE` and `~` expanded, `**` recursive, deny wins), bash's
`allowlist` / `denylist` and `timeout`, web tools' `allow_domains`; `[mcp]` with `default_deny`
and `allowed_tools = ["server:tool"]`. A tool with a table is enabled unless it says otherwise; a
tool without one is enabled unless `default_deny`. Under `default_deny` a path tool refuses every
path its `allow` does not name.

Our own keys, which the real system ignores: top-level `protected_files` (more names or paths never
written, edited, read or listed) and `max_output` (characters a result gives back); in `[bash]`
`max_processes`, `max_memory_mb`, `max_file_mb`; in `[web_fetch]` `allow_private`.
"""

from __future__ import annotations

import fnmatch
import os
import re
import tomllib
from pathlib import Path
from typing import Any

from agentrun.activities.tools.globs import glob_regex
from agentrun.lang.errors import Problem, SpecError, did_you_mean
from agentrun.models.tools import PROTECTED_FILES, McpPolicy, ToolLimits, ToolPolicy, ToolRule

_LIST_KEYS = ("allow", "deny", "allowlist", "denylist", "allow_domains", "allowed_dirs")
_TOOL_KEYS = (
    "enabled",
    *_LIST_KEYS,
    "rate_limit",
    "sandbox",
    "timeout",
    "max_processes",
    "max_memory_mb",
    "max_file_mb",
    "allow_private",
)
_TOP_KEYS = ("default_deny", "protected_files", "max_output", "allowed_dirs")
_MCP_KEYS = ("default_deny", "allowed_tools")
_SECURITY_KEYS = ("extra_patterns", "extra_keywords")  # the real system's content scanning: read, not used


def load_policy(path: str | Path) -> ToolPolicy:
    """Read a policy.toml; any problem is a SpecError naming file:line with a hint."""
    where = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise SpecError([Problem(where, 0, 0, f"cannot read the policy: {e.strerror}")]) from None
    return parse_policy(text, where)


def parse_policy(text: str, source: str = "policy.toml") -> ToolPolicy:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        line, column = _position(str(e))
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(e))
        raise SpecError([Problem(source, line, column, f"not valid TOML: {message}")]) from None
    reader = _Reader(text, source)
    policy = reader.read(data)
    if reader.problems:
        raise SpecError(reader.problems)
    return policy


class _Reader:
    def __init__(self, text: str, source: str):
        self.lines = text.splitlines()
        self.source = source
        self.problems: list[Problem] = []

    def read(self, data: dict[str, Any]) -> ToolPolicy:
        tools: dict[str, ToolRule] = {}
        limits = ToolLimits()
        allow_private = False
        mcp: McpPolicy | None = None
        for key, value in data.items():
            if key == "mcp":
                mcp = self._mcp(value)
            elif key == "security":
                self._table(key, value, _SECURITY_KEYS)
            elif isinstance(value, dict):
                tools[key] = self._tool(key, value)
                if key == "bash":
                    limits = self._bash_limits(value, limits)
                if key == "web_fetch":
                    allow_private = self._bool(key, "allow_private", value.get("allow_private", False))
            elif key not in _TOP_KEYS:
                self._unknown(None, key, _TOP_KEYS)
        default_deny = self._bool(None, "default_deny", data.get("default_deny", False))
        protected = self._strings(None, "protected_files", data.get("protected_files", []))
        if "max_output" in data:
            limits = limits.model_copy(update={"output_chars": self._positive(None, "max_output", data["max_output"])})
        return ToolPolicy(
            default_deny=default_deny,
            tools=tools,
            protected_files=protected,
            mcp=mcp,
            limits=limits,
            allow_private=allow_private,
            source=self.source,
        )

    def _tool(self, name: str, table: dict[str, Any]) -> ToolRule:
        self._table(name, table, _TOOL_KEYS)
        lists = {key: self._strings(name, key, table.get(key, [])) for key in _LIST_KEYS if key != "allowed_dirs"}
        timeout = table.get("timeout")
        return ToolRule(
            enabled=self._bool(name, "enabled", table.get("enabled", True)),
            timeout_s=float(self._positive(name, "timeout", timeout)) if timeout is not None else None,
            **lists,
        )

    def _bash_limits(self, table: dict[str, Any], limits: ToolLimits) -> ToolLimits:
        update: dict[str, int] = {}
        if "max_processes" in table:
            update["processes"] = self._positive("bash", "max_processes", table["max_processes"])
        if "max_memory_mb" in table:
            update["memory_bytes"] = self._positive("bash", "max_memory_mb", table["max_memory_mb"]) << 20
        if "max_file_mb" in table:
            update["file_bytes"] = self._positive("bash", "max_file_mb", table["max_file_mb"]) << 20
        if "timeout" in table:
            update["bash_timeout_s"] = self._positive("bash", "timeout", table["timeout"])
        return limits.model_copy(update=update)

    def _mcp(self, table: Any) -> McpPolicy | None:
        if not isinstance(table, dict):
            self._problem(None, "mcp", "`mcp` must be a table: [mcp]")
            return None
        self._table("mcp", table, _MCP_KEYS)
        return McpPolicy(
            default_deny=self._bool("mcp", "default_deny", table.get("default_deny", False)),
            allowed_tools=self._strings("mcp", "allowed_tools", table.get("allowed_tools", [])),
        )

    def _table(self, name: str, table: Any, known: tuple[str, ...]) -> None:
        if not isinstance(table, dict):
            self._problem(None, name, f"`{name}` must be a table: [{name}]")
            return
        for key in table:
            if key not in known:
                self._unknown(name, key, known)

    def _unknown(self, table: str | None, key: str, known: tuple[str, ...]) -> None:
        where = f"[{table}]" if table else "the top level"
        hint = did_you_mean(key, known) or "known keys: " + ", ".join(known)
        self._problem(table, key, f"unknown key '{key}' in {where}", hint)

    def _bool(self, table: str | None, key: str, value: Any) -> bool:
        if not isinstance(value, bool):
            self._problem(table, key, f"`{key}` must be true or false, not {value!r}")
            return False
        return value

    def _strings(self, table: str | None, key: str, value: Any) -> list[str]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self._problem(table, key, f"`{key}` must be a list of strings", f'{key} = ["..."]')
            return []
        return list(value)

    def _positive(self, table: str | None, key: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            self._problem(table, key, f"`{key}` must be a whole number above 0, not {value!r}")
            return 1
        return value

    def _problem(self, table: str | None, key: str, message: str, hint: str = "") -> None:
        line = self._line_of(table, key)
        self.problems.append(Problem(self.source, line, 1 if line else 0, message, hint))

    def _line_of(self, table: str | None, key: str) -> int:
        """The line that sets `key` in `table` (None: the top level), 0 if it cannot be found."""
        current: str | None = None
        for number, raw in enumerate(self.lines, 1):
            line = raw.strip()
            header = re.fullmatch(r"\[\s*([^\]]+?)\s*\]\s*(#.*)?", line)
            if header:
                current = header.group(1).strip('"')
                if table is None and current == key:
                    return number
                continue
            if current == table and re.match(rf'"?{re.escape(key)}"?\s*=', line):
                return number
        return 0


def _position(message: str) -> tuple[int, int]:
    found = re.search(r"line (\d+), column (\d+)", message)
    return (int(found.group(1)), int(found.group(2))) if found else (0, 0)


# --- checks ---


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
