"""What a spec grants its agents: a task's ToolGrant, the policy.toml a spec names (read before the
run, so a mistake in it is found by validate), and which tools a policy leaves on.

Built-in tools carry the Agentfile's real system's names (`lang.tool_names`); workflow-local tools
are answered by the workflow itself (cycgraph's `save_to_memory`)."""

from __future__ import annotations

import tomllib
from typing import Any

from agentrun.lang import ir
from agentrun.lang.tool_names import BUILTIN_TOOLS, nearest_tool_name

SAVE_TO_MEMORY = "save_to_memory"
LOCAL = (SAVE_TO_MEMORY,)  # answered in the workflow, not by an activity
DEFAULT_MAX_CALLS = 50  # tool calls one step may make; one more fails it


def unknown(name: str, known: list[str] | tuple[str, ...] = ()) -> tuple[str, str]:
    """The message and hint for a tool name no one knows: the nearest known name, or the list."""
    near = nearest_tool_name(name, known)
    hint = f"did you mean '{near}'?" if near else "the tools are " + ", ".join([*BUILTIN_TOOLS, *known])
    return f"unknown tool '{name}'", hint


def read_policy(path: str) -> tuple[dict[str, Any] | None, str]:
    """The tables of the policy.toml at `path` as TOML reads them, or None and why not (TOML's own
    message names the line and column). What each table means is the tools' business."""
    try:
        with open(path, "rb") as f:
            return tomllib.load(f), ""
    except FileNotFoundError:
        return None, f"no policy file {path}"
    except (OSError, tomllib.TOMLDecodeError) as exc:
        return None, f"{path}: {exc}"


def grant(
    builtin: list[str],
    mcp: list[ir.McpGrant] | None = None,
    local: list[str] | None = None,
    max_calls: int | None = None,
) -> ir.ToolGrant | None:
    """A task's grant, or None when it grants nothing (then nothing is offered, as before tools)."""
    found = ir.ToolGrant(
        builtin=list(dict.fromkeys(builtin)),
        mcp=mcp or [],
        local=list(dict.fromkeys(local or [])),
        max_calls=max_calls or DEFAULT_MAX_CALLS,
    )
    return None if found.empty else found


def enabled(tables: dict[str, Any] | None, names: tuple[str, ...] = BUILTIN_TOOLS) -> list[str]:
    """The tools of `names` a policy leaves on, as the Agentfile's real system decides: each is on
    unless its table says `enabled = false`; with `default_deny = true`, only those that say
    `enabled = true`."""
    tables = tables or {}
    deny = tables.get("default_deny") is True

    def on(name: str) -> bool:
        table = tables.get(name)
        said = table.get("enabled") if isinstance(table, dict) else None
        return said is True if deny else said is not False

    return [n for n in names if on(n)]
