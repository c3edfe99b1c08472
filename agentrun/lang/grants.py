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
    """The tables of the policy.toml at `path` as TOML reads them, or None and why not: TOML's own
    message, or the first value of the wrong type, each with its line. What each table means is
    the tools' business; a value of the wrong type would silently keep a default there."""
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", "replace")
        tables = tomllib.loads(text)
    except FileNotFoundError:
        return None, f"no policy file {path}"
    except (OSError, tomllib.TOMLDecodeError) as exc:
        return None, f"{path}: {exc}"
    wrong = _wrong_value(tables)
    if wrong is None:
        return tables, ""
    table, key, want = wrong
    where = f"[{table}] " if table else ""
    return None, f"{path}:{_line_of(text, table, key)}: {where}{key} must be {want}"


_WANTS = {
    **dict.fromkeys(("enabled", "default_deny", "allow_private"), "true or false"),
    **dict.fromkeys(
        ("allow", "deny", "allowlist", "denylist", "allow_domains", "allowed_dirs", "allowed_tools", "protected_files"),
        "a list of strings",
    ),
    **dict.fromkeys(
        ("timeout", "max_processes", "max_memory_mb", "max_file_mb", "max_output"), "a whole number above 0"
    ),
}


def _wrong_value(tables: dict[str, Any]) -> tuple[str, str, str] | None:
    """(table, key, what it must be) of the first value of a known key with the wrong type."""
    places = [("", tables), *((name, t) for name, t in tables.items() if isinstance(t, dict))]
    for table, values in places:
        for key, value in values.items():
            want = _WANTS.get(key)
            if want is not None and not _is(want, value):
                return table, key, want
    return None


def _is(want: str, value: Any) -> bool:
    if want == "true or false":
        return isinstance(value, bool)
    if want == "a list of strings":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _line_of(text: str, table: str, key: str) -> int:
    """The line that sets `key` in `table` ("" for the top level); 1 when it cannot be told."""
    current = ""
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if line.startswith("[") and not line.startswith("[["):
            current = line.strip("[] ").split("]")[0].strip().strip('"')
        elif current == table and line.split("=")[0].strip().strip('"') == key:
            return number
    return 1


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
