"""A policy.toml's tables (as a spec's compiler read and checked them, lang.grants.read_policy) as
the ToolPolicy every tool call carries; agentrun.policy decides each call on it.
Pure: the workflow builds it once a run from the plan it was given, so it never fails on a value:
one of the wrong type (which validate refuses before any run) keeps the safe default."""

from __future__ import annotations

from typing import Any, cast

from agentrun.lang.errors import SpecError
from agentrun.lang.grants import Tables, check_policy_text
from agentrun.models.tools import McpPolicy, ToolLimits, ToolPolicy, ToolRule

_LISTS = ("allow", "deny", "allowlist", "denylist", "allow_domains", "allow_read", "allow_write")
# [bash] keys that set a limit: the ToolLimits field and the unit the key counts in.
_BASH_LIMITS: dict[str, tuple[str, int]] = {
    "max_processes": ("processes", 1),
    "max_memory_mb": ("memory_bytes", 1 << 20),
    "max_file_mb": ("file_bytes", 1 << 20),
    "timeout": ("bash_timeout_s", 1),
}
Table = dict[str, Any]


def parse(text: str, source: str = "policy.toml") -> ToolPolicy:
    """The policy a policy.toml's `text` says, read as a spec's compiler reads the file it names; a
    mistake in it is a SpecError at `source`'s line, with a hint when there is one."""
    tables, wrong = check_policy_text(text, source)
    if wrong is not None:
        raise SpecError([wrong])
    return from_tables(tables, source)


def from_tables(tables: Tables | None, source: str = "") -> ToolPolicy:
    """The policy the tables say; none: the defaults."""
    if not tables:
        return ToolPolicy(source=source)
    sections = _tables(tables)
    rules = {name: _rule(t) for name, t in sections.items() if name not in ("mcp", "security")}
    bash = sections.get("bash", {})
    update = {field: count * unit for key, (field, unit) in _BASH_LIMITS.items() if (count := _count(bash, key))}
    if output := _count(tables, "max_output"):
        update["output_chars"] = output
    mcp = sections.get("mcp")
    return ToolPolicy(
        default_deny=tables.get("default_deny") is True,
        tools=rules,
        protected_files=_strings(tables.get("protected_files")),
        writable_files=_strings(tables.get("writable_files")),
        mcp=McpPolicy(
            default_deny=mcp.get("default_deny") is True,
            allowed_tools=_strings(mcp.get("allowed_tools")),
            ask_tools=_strings(mcp.get("ask_tools")),
        )
        if mcp is not None
        else None,
        limits=ToolLimits().model_copy(update=update),
        allow_private=sections.get("web_fetch", {}).get("allow_private") is True,
        sandbox=tables.get("sandbox") not in ("off", False),
        source=source,
        ask_timeout_s=float(ask_timeout) if (ask_timeout := _count(tables, "ask_timeout")) else None,
    )


def _tables(tables: Table) -> dict[str, Table]:
    return {name: cast(Table, t) for name, t in tables.items() if isinstance(t, dict)}


def _rule(table: Table) -> ToolRule:
    timeout = _count(table, "timeout")
    return ToolRule(
        enabled=table.get("enabled") is not False,
        allow_network=table.get("allow_network") is True,
        timeout_s=float(timeout) if timeout else None,
        ask=_strings(table.get("ask")),
        ask_all=table.get("ask") is True,
        **{key: _strings(table.get(key)) for key in _LISTS},
    )


def _strings(value: Any) -> list[str]:
    if not isinstance(value, list):
        return []
    items = cast(list[Any], value)
    return [str(v) for v in items] if all(isinstance(v, str) for v in items) else []


def _count(table: Table, key: str) -> int:
    """The whole number above 0 at `key`, else 0."""
    value = table.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
