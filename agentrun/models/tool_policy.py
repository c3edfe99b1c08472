"""A policy.toml's tables (as a spec's compiler read them) as the ToolPolicy every tool call carries.
Pure: the workflow builds it once a run, from the plan it was given."""

from __future__ import annotations

from typing import Any

from agentrun.models.tools import BUILTIN_TOOLS, McpPolicy, ToolPolicy, ToolRule

_RULE_KEYS = ("enabled", "allow", "deny", "allowlist", "denylist", "allow_domains")


def from_tables(tables: dict[str, Any] | None, source: str = "") -> ToolPolicy:
    """The policy the tables say, with the safe defaults for whatever they leave out; no tables:
    the defaults. Tables of tools this engine does not have (memory_read) are left out."""
    if not tables:
        return ToolPolicy()
    rules = {
        name: ToolRule(**_rule(table))
        for name, table in tables.items()
        if isinstance(table, dict) and name in BUILTIN_TOOLS
    }
    mcp = tables.get("mcp")
    return ToolPolicy(
        default_deny=tables.get("default_deny") is True,
        tools=rules,
        mcp=McpPolicy(**{k: v for k, v in mcp.items() if k in McpPolicy.model_fields})
        if isinstance(mcp, dict)
        else None,
        source=source,
    )


def _rule(table: dict[str, Any]) -> dict[str, Any]:
    rule = {k: table[k] for k in _RULE_KEYS if k in table}
    if isinstance(table.get("timeout"), (int, float)):
        rule["timeout_s"] = float(table["timeout"])
    return rule
