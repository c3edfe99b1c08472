"""What a spec grants its agents: a task's ToolGrant, the policy.toml a spec names (read before the
run, so a mistake in it is found by validate), and which tools a policy leaves on.

Built-in tools carry the Agentfile's real system's names (`lang.tool_names`); workflow-local tools
are answered by the workflow itself (cycgraph's `save_to_memory`)."""

from __future__ import annotations

import re
import tomllib
from typing import Any

from agentrun.lang import ir
from agentrun.lang.errors import Problem, did_you_mean
from agentrun.lang.protected import secret_name
from agentrun.lang.source import note
from agentrun.lang.tool_names import BUILTIN_TOOLS, nearest_tool_name

SAVE_TO_MEMORY = "save_to_memory"
LOCAL = (SAVE_TO_MEMORY,)  # answered in the workflow, not by an activity
DEFAULT_MAX_CALLS = 50  # tool calls one step may make; one more fails it
Tables = dict[str, Any]  # a policy.toml as TOML reads it


def unknown(name: str, known: list[str] | tuple[str, ...] = ()) -> tuple[str, str]:
    """The message and hint for a tool name no one knows: the nearest known name, or the list."""
    near = nearest_tool_name(name, known)
    hint = f"did you mean '{near}'?" if near else "the tools are " + ", ".join([*BUILTIN_TOOLS, *known])
    return f"unknown tool '{name}'", hint


BIND_HINT = "bind it: engine.worker(tools=[a_function]) in Python, or host_tools: in agentrun.yaml"


def host_note(name: str) -> tuple[str, str]:
    """What validate says of a host tool a spec names: the host that runs it must bind it."""
    return f"host tool '{name}' must be bound by the host that runs this spec", BIND_HINT


def read_policy(path: str) -> tuple[Tables | None, str, str]:
    """The tables of the policy.toml at `path`, or None, why not (with its line) and a hint ("" for
    none), as `check_policy_text` finds it."""
    note(path)
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return None, f"no policy file {path}", ""
    except OSError as exc:
        return None, f"{path}: {exc}", ""
    tables, wrong = check_policy_text(text, path)
    if wrong is None:
        return tables, "", ""
    where = f"{path}:{wrong.line}" if wrong.line else path
    return None, f"{where}: {wrong.message}", wrong.hint


def check_policy_text(text: str, path: str) -> tuple[Tables | None, Problem | None]:
    """The tables of a policy.toml's `text` as TOML reads them, or None and the first mistake at its
    line: TOML's own, a key the Agentfile's real system does not know and neither do we, or a value
    of the wrong type. What each table means is the tools' business (`models.tool_policy`), which
    would silently ignore a misspelled key and keep a default for a value of the wrong type: in a
    security policy the worst outcome, so both are refused here, before any run."""
    try:
        tables = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = re.search(r"\s*\(at line (\d+), column (\d+)\)", str(exc))
        line, column = (int(found.group(1)), int(found.group(2))) if found else (0, 0)
        message = str(exc).replace(found.group(0), "") if found else str(exc)
        return None, Problem(path, line, column, f"not valid TOML: {message}")
    mistake = _mistake(tables)
    if mistake is None:
        return tables, None
    table, key, message, hint = mistake
    return None, Problem(path, _line_of(text, table, key), 1, message, hint)


# The keys the real system's policy.toml knows, with ours among them (protected_files, writable_files,
# max_output, sandbox, ask_timeout, bash's max_processes / max_memory_mb / max_file_mb / allow_read /
# allow_write / allow_network, web_fetch's allow_private, every tool's ask). Any table other than
# [mcp] and [security] is a tool's: the real system has tools we do not.
_TOP_KEYS = (
    "default_deny",
    "protected_files",
    "writable_files",
    "max_output",
    "allowed_dirs",
    "sandbox",
    "ask_timeout",
)
_TOOL_KEYS = (
    "enabled",
    "allow",
    "deny",
    "allowlist",
    "denylist",
    "allow_domains",
    "allowed_dirs",
    "rate_limit",
    "sandbox",
    "timeout",
    "max_processes",
    "max_memory_mb",
    "max_file_mb",
    "allow_private",
    "ask",
    "allow_read",
    "allow_write",
    "allow_network",
)
_SECTION_KEYS = {
    "mcp": ("default_deny", "allowed_tools", "ask_tools"),
    "security": ("extra_patterns", "extra_keywords"),
}
_WANTS = {
    **dict.fromkeys(("enabled", "default_deny", "allow_private", "allow_network"), "true or false"),
    **dict.fromkeys(
        (
            "allow",
            "deny",
            "allowlist",
            "denylist",
            "allow_domains",
            "allowed_dirs",
            "allowed_tools",
            "ask_tools",
            "protected_files",
            "allow_read",
            "allow_write",
            "writable_files",
        ),
        "a list of strings",
    ),
    **dict.fromkeys(
        ("timeout", "max_processes", "max_memory_mb", "max_file_mb", "max_output", "ask_timeout"),
        "a whole number above 0",
    ),
    "ask": "true or false, or a list of strings",
}


# The top level's own: a tool table's `sandbox` is the real system's, read and not used, any value.
_TOP_WANTS = {"sandbox": '"on" or "off"'}


def _mistake(tables: Tables) -> tuple[str, str, str, str] | None:
    """(table, key, message, hint) of the first unknown key or value of the wrong type, in the
    order of the file: the top level's keys come before its tables."""
    top = {key: value for key, value in tables.items() if not isinstance(value, dict)}
    places = [("", top, _TOP_KEYS)]
    places += [(name, t, _SECTION_KEYS.get(name, _TOOL_KEYS)) for name, t in tables.items() if isinstance(t, dict)]
    for table, values, known in places:
        if (misspelled := _misspelled_tool(table)) is not None:
            return table, "", f"[{table}] is no tool's table", f"did you mean [{misspelled}]?"
        for key, value in values.items():
            if not table and key in _SECTION_KEYS:
                return table, key, f"{key} must be a table: [{key}]", ""
            if key not in known:
                where = f"in [{table}]" if table else "at the top level"
                hint = did_you_mean(key, known) or "the keys are " + ", ".join(known)
                return table, key, f"unknown key '{key}' {where}", hint
            want = (_TOP_WANTS.get(key) if not table else None) or _WANTS.get(key)
            if want is not None and not _is(want, value):
                return table, key, f"{f'[{table}] ' if table else ''}{key} must be {want}", ""
            if not table and key == "writable_files" and (secret := next(filter(secret_name, value), None)):
                hint = "keys go in the worker's environment; an agent never reads or writes a secret file"
                return table, key, f"writable_files may not name a secret file ({secret})", hint
    return None


def _misspelled_tool(table: str) -> str | None:
    """The built-in tool a table's name is a slip for (`[bsh]`: bash). Any other name is taken as a
    tool of the real system's we do not have, as it takes it; a name this close to a built-in is a
    typo, whose rules would otherwise guard nothing."""
    if not table or table in _SECTION_KEYS or table in BUILTIN_TOOLS:
        return None
    slips = 1 if len(table) <= 5 else 2  # `code_search` is another tool, not a slip for web_search
    return next((tool for tool in BUILTIN_TOOLS if _edits(table, tool) <= slips), None)


def _edits(a: str, b: str) -> int:
    """How many characters to insert, delete or change to turn `a` into `b` (Levenshtein)."""
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        previous, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (x != y))
    return row[-1]


def _is(want: str, value: Any) -> bool:
    if want == "true or false":
        return isinstance(value, bool)
    if want == '"on" or "off"':
        return value in ("on", "off") or isinstance(value, bool)
    if want == "a list of strings":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if want == "true or false, or a list of strings":
        return _is("true or false", value) or _is("a list of strings", value)
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _line_of(text: str, table: str, key: str) -> int:
    """The line that sets `key` in `table` ("" for the top level; `key` "" for the table's header);
    1 when it cannot be told."""
    current = ""
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if line.startswith("[") and not line.startswith("[["):
            current = line.strip("[] ").split("]")[0].strip().strip('"')
            if current == table and not key:
                return number
        elif current == table and line.split("=")[0].strip().strip('"') == key:
            return number
    return 1


def grant(
    builtin: list[str],
    mcp: list[ir.McpGrant] | None = None,
    local: list[str] | None = None,
    max_calls: int | None = None,
    host: list[str] | None = None,
) -> ir.ToolGrant | None:
    """A task's grant, or None when it grants nothing (then nothing is offered, as before tools)."""
    found = ir.ToolGrant(
        builtin=list(dict.fromkeys(builtin)),
        mcp=mcp or [],
        local=list(dict.fromkeys(local or [])),
        max_calls=max_calls or DEFAULT_MAX_CALLS,
        host=list(dict.fromkeys(host or [])),
    )
    return None if found.empty else found


def enabled(tables: Tables | None, names: tuple[str, ...] = BUILTIN_TOOLS) -> list[str]:
    """The tools of `names` a policy leaves on, as the Agentfile's real system decides: a tool with a
    table is on unless it says `enabled = false`; one without a table is on unless `default_deny`
    (as the ToolPolicy the workflow builds from the same tables, models.tool_policy, decides)."""
    tables = tables or {}
    deny = tables.get("default_deny") is True

    def on(name: str) -> bool:
        table = tables.get(name)
        if isinstance(table, dict):
            return table.get("enabled") is not False
        return not deny

    return [n for n in names if on(n)]
