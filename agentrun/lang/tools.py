"""The names of the tools a spec may grant an agent, in each language's words, and how they are read.

Built-in tools carry the names and parameters of the Agentfile's real system (`read`, `write`, …);
the pipeline language's names (`Read`, `Write`, …) map onto them. Workflow-local tools are answered
by the workflow itself (cycgraph's `save_to_memory`). What a tool does lives with its activity."""

from __future__ import annotations

import tomllib
from typing import Any

from agentrun.lang import ir
from agentrun.lang.errors import did_you_mean

BUILTINS = ("read", "write", "edit", "glob", "grep", "ls", "bash", "web_fetch", "web_search")
# The pipeline language's names (Claude Code's), each mapped onto a built-in tool.
PIPELINE_NAMES = {
    "Read": "read",
    "Write": "write",
    "Edit": "edit",
    "Bash": "bash",
    "Glob": "glob",
    "Grep": "grep",
    "LS": "ls",
    "WebFetch": "web_fetch",
    "WebSearch": "web_search",
}
SAVE_TO_MEMORY = "save_to_memory"
LOCAL = (SAVE_TO_MEMORY,)  # answered in the workflow, not by an activity
DEFAULT_MAX_CALLS = 50  # tool calls one step may make; one more fails it


def builtin_of(name: str, names: dict[str, str] | None = None) -> str | None:
    """The built-in tool `name` means (a language's own name or the built-in's), else None."""
    if name in BUILTINS:
        return name
    return (names or {}).get(name)


def unknown(name: str, known: list[str] | tuple[str, ...]) -> tuple[str, str]:
    """The message and hint for a tool name no one knows: the nearest known name, or the list."""
    hint = did_you_mean(name, known) or "the tools are " + ", ".join(known)
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
    builtin: list[str], mcp: list[ir.McpGrant] | None = None, local: list[str] | None = None, max_calls: int | None = None
) -> ir.ToolGrant | None:
    """A task's grant, or None when it grants nothing (then nothing is offered, as before tools)."""
    found = ir.ToolGrant(
        builtin=list(dict.fromkeys(builtin)),
        mcp=mcp or [],
        local=list(dict.fromkeys(local or [])),
        max_calls=max_calls or DEFAULT_MAX_CALLS,
    )
    return None if found.empty else found


def enabled(tables: dict[str, Any] | None, names: tuple[str, ...] = BUILTINS) -> list[str]:
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
