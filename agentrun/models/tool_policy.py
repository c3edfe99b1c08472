"""A policy.toml's tables (as a spec's compiler read and checked them) as the ToolPolicy every tool
call carries, with the keys and meanings of agentrun/activities/tools/policy.py. Pure: the workflow
builds it once a run from the plan it was given, so it never fails on a value: one of the wrong
type (which validate refuses before any run) keeps the safe default."""

from __future__ import annotations

from typing import Any

from agentrun.models.tools import McpPolicy, ToolLimits, ToolPolicy, ToolRule

_LISTS = ("allow", "deny", "allowlist", "denylist", "allow_domains")
_BASH_LIMITS = {"max_processes": ("processes", 1), "max_memory_mb": ("memory_bytes", 1 << 20)}
_BASH_LIMITS |= {"max_file_mb": ("file_bytes", 1 << 20), "timeout": ("bash_timeout_s", 1)}


def from_tables(tables: dict[str, Any] | None, source: str = "") -> ToolPolicy:
    """The policy the tables say; none: the defaults."""
    if not tables:
        return ToolPolicy()
    rules = {name: _rule(t) for name, t in tables.items() if isinstance(t, dict) and name not in ("mcp", "security")}
    limits = ToolLimits()
    bash = tables.get("bash")
    if isinstance(bash, dict):
        update = {field: bash[key] * unit for key, (field, unit) in _BASH_LIMITS.items() if _positive(bash.get(key))}
        limits = limits.model_copy(update=update)
    if _positive(tables.get("max_output")):
        limits = limits.model_copy(update={"output_chars": tables["max_output"]})
    fetch = tables.get("web_fetch")
    return ToolPolicy(
        default_deny=tables.get("default_deny") is True,
        tools=rules,
        protected_files=_strings(tables.get("protected_files")),
        mcp=_mcp(tables.get("mcp")),
        limits=limits,
        allow_private=isinstance(fetch, dict) and fetch.get("allow_private") is True,
        source=source,
    )


def _rule(table: dict[str, Any]) -> ToolRule:
    timeout = table.get("timeout")
    return ToolRule(
        enabled=table.get("enabled") is not False,
        timeout_s=float(timeout) if isinstance(timeout, int) and _positive(timeout) else None,
        **{key: _strings(table.get(key)) for key in _LISTS},
    )


def _mcp(table: Any) -> McpPolicy | None:
    if not isinstance(table, dict):
        return None
    return McpPolicy(default_deny=table.get("default_deny") is True, allowed_tools=_strings(table.get("allowed_tools")))


def _strings(value: Any) -> list[str]:
    return list(value) if isinstance(value, list) and all(isinstance(v, str) for v in value) else []


def _positive(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
