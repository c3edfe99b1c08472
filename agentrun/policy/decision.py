"""Whether one tool call may run under the run's policy: `decide(policy, asked)`, the one place it is
decided, for every tool source.

- built-in (`builtin`): the tool's table is on (`enabled`, `default_deny`); then what its
  arguments name: bash's `command` (policy.commands), web_fetch's `url` (policy.web), a path
  tool's `path` (policy.paths, glob and grep under read's globs too). A tool asks at the moment it
  has the thing to check: the run_tool activity with the tool's name alone, bash with its command,
  web_fetch with each URL it is about to reach (a redirect too), a path tool with each path it
  found inside the work directory.
- MCP (`mcp`, `server:tool`): not a tool the server's declaration denies, one the step was granted,
  and the `[mcp]` table's `allowed_tools` under its `default_deny`, matched as the Agentfile's real
  system matches them (`server:tool`, `server:*`, `*:tool`); without an `[mcp]` table every tool
  may run, with a warning for the operator, as there.
- local (`local`, answered by the workflow): save_to_memory never writes the engine's own keys.
- host (`host`, a function or command the host binds by name): its own table by that name, as a
  built-in's (`enabled`, `default_deny`, `ask`).

Then `ask` (`approval`): a call the policy lets run, whose tool's table has `ask` (true, or a
pattern the call matches: bash a command glob on the whole line or any of its commands, a path tool
a path glob as `allow` reads them, web_fetch a URL glob, web_search a glob on its query) or whose
MCP tool is in `[mcp] ask_tools`, is decided "ask": the workflow opens a gate before the call is scheduled and runs it once a person
approves. A tool that meets "ask" runs the call: the workflow has asked already.

Pure text: no file, clock or network is read (the worker's home only for a `~` pattern), so the
workflow may decide too. What is decided on the file itself at the moment of access (a path inside
the work directory, a link, a protected file, an address) stays with the tools."""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from agentrun.lang.grants import SAVE_TO_MEMORY
from agentrun.models.tools import ToolPolicy
from agentrun.policy import commands, paths

# "ask": a person approves first (the workflow asks before it schedules the call); "refuse": never.
Verdict = Literal["allow", "ask", "refuse"]
Source = Literal["builtin", "mcp", "local", "host"]

PATH_TOOLS = frozenset({"read", "write", "edit", "glob", "grep", "ls"})
WEB_TOOLS = frozenset({"web_fetch"})
NO_MCP_TABLE = (
    "the policy has no [mcp] table: every MCP tool is allowed (add one with default_deny = true to narrow it)"
)


@dataclass(frozen=True)
class Decision:
    """The policy's answer: `reason` says why a call is refused, for the model to read; `warning`,
    something the operator should hear of a call that runs; `pattern`, what an "ask" matched (a
    person may approve it for the rest of the run)."""

    verdict: Verdict
    reason: str = ""
    warning: str = ""
    pattern: str = ""

    @property
    def allowed(self) -> bool:
        return self.verdict == "allow"

    @property
    def refused(self) -> bool:
        return self.verdict == "refuse"


ALLOW = Decision("allow")


@dataclass(frozen=True)
class Asked:
    """One call as the policy sees it: its source, the tool (a built-in's name, `server:tool` for an
    MCP server's, a local tool's name) and the arguments to decide on. `workdir` is where a relative
    path is; `granted` and `denied` are an MCP call's grant (empty: every tool of the server) and
    what the server's declaration denies."""

    source: Source
    tool: str
    arguments: Mapping[str, Any] = field(default_factory=dict[str, Any])
    workdir: str = ""
    granted: Sequence[str] = ()
    denied: Sequence[str] = ()


def decide(policy: ToolPolicy, asked: Asked) -> Decision:
    """Whether the call may run, and if not why; a call that may run asks when the policy says so."""
    decision = _SOURCES[asked.source](policy, asked)
    if decision.refused:
        return decision
    asking = approval(policy, asked)
    return asking if asking.verdict == "ask" else decision


def approval(policy: ToolPolicy, asked: Asked) -> Decision:
    """ "ask" when a person approves the call first, with the pattern it matched; else ALLOW. Text
    only, without the refusal checks: what the workflow asks before it schedules a call (a refused
    call is refused by its tool, as before)."""
    if asked.source == "mcp":
        server, _, tool = asked.tool.partition(":")
        wanted = policy.mcp.ask_tools if policy.mcp is not None else []
        found = next((p for p in wanted if mcp_match(p, server, tool)), None)
        return (
            ALLOW if found is None else Decision("ask", f"MCP tool {asked.tool} is in [mcp] ask_tools", pattern=found)
        )
    if asked.source not in ("builtin", "host"):
        return ALLOW
    rule = policy.rule(asked.tool)
    if rule.ask_all:
        return Decision("ask", f"[{asked.tool}] ask = true", pattern="*")
    found = next((p for p in rule.ask if _asks(p, asked)), None)
    return ALLOW if found is None else Decision("ask", f"it matches [{asked.tool}] ask {found!r}", pattern=found)


def _asks(pattern: str, asked: Asked) -> bool:
    """Whether one `ask` pattern takes the call: a glob (`*` any text) on bash's command line or
    any command in it, a path tool's path (as `allow` globs read it, relative to the work
    directory), a web tool's URL."""
    arguments = asked.arguments
    if asked.tool == "bash" and "command" in arguments:
        line = str(arguments["command"]).strip()
        parts = [line, *commands.segments(line)]
        parts += [_unprefixed(part) for part in parts]  # `env X=1 ./deploy.sh prod` runs ./deploy.sh
        return any(fnmatch.fnmatchcase(part, pattern) for part in parts)
    if asked.tool in PATH_TOOLS and "path" in arguments:
        workdir = asked.workdir or "/"
        where = pattern if pattern.startswith(("/", "$WORKSPACE", "~")) else f"$WORKSPACE/{pattern}"
        absolute = os.path.normpath(os.path.join(workdir, str(arguments["path"])))
        return paths.match_path(paths.expand(where, workdir), absolute)
    if asked.tool in ("web_fetch", "web_search"):
        subject = str(arguments.get("url", arguments.get("query", "")))
        return fnmatch.fnmatchcase(subject, pattern)
    return False


def _refused(reason: str | None) -> Decision:
    return ALLOW if reason is None else Decision("refuse", reason)


def _builtin(policy: ToolPolicy, asked: Asked) -> Decision:
    tool, arguments = asked.tool, asked.arguments
    rule = policy.rule(tool)
    if not rule.enabled:
        return _refused(f"tool {tool} is disabled by the policy")
    if tool == "bash" and "command" in arguments:
        return _refused(commands.refusal(str(arguments["command"]), rule))
    if tool in WEB_TOOLS and "url" in arguments:
        from agentrun.policy import web  # httpx, loaded where a URL is decided (the tools' worker)

        return _refused(web.refusal(rule, tool, str(arguments["url"])))
    if tool in PATH_TOOLS and "path" in arguments:
        return _refused(paths.refusal(policy, tool, str(arguments["path"]), asked.workdir))
    return ALLOW


def _mcp(policy: ToolPolicy, asked: Asked) -> Decision:
    server, _, tool = asked.tool.partition(":")
    if tool in asked.denied:
        return _refused(f"tool {tool!r} of MCP server {server!r} is denied by the server's declaration")
    if asked.granted and tool not in asked.granted:
        granted = ", ".join(asked.granted)
        return _refused(f"tool {tool!r} of MCP server {server!r} is not granted to this step (granted: {granted})")
    if policy.mcp is None:
        return Decision("allow", warning=NO_MCP_TABLE)
    if policy.mcp.default_deny and not any(mcp_match(p, server, tool) for p in policy.mcp.allowed_tools):
        return _refused(f"policy denied: MCP tool '{server}:{tool}' is not in [mcp] allowed_tools (default_deny is on)")
    return ALLOW


def mcp_match(pattern: str, server: str, tool: str) -> bool:
    """The real system's `server:tool` pattern: each side a name or `*` for any; no other wildcard."""
    wanted_server, colon, wanted_tool = pattern.partition(":")
    if not colon:
        return pattern == f"{server}:{tool}"
    return wanted_server in ("*", server) and wanted_tool in ("*", tool)


def _unprefixed(command: str) -> str:
    """A simple command from its program on, past `VAR=value` assignments, `env`, `command` and `exec`."""
    words = command.split()
    while words and (re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]) or words[0] in ("env", "command", "exec")):
        words = words[1:]
    return " ".join(words)


def _local(policy: ToolPolicy, asked: Asked) -> Decision:
    key = asked.arguments.get("key")
    if asked.tool == SAVE_TO_MEMORY and isinstance(key, str) and key.startswith("_"):
        return _refused(f"memory keys starting with '_' are reserved; '{key}' was not saved")
    return ALLOW


def _host(policy: ToolPolicy, asked: Asked) -> Decision:
    """A host tool has a table of its own, by its name, as a built-in does (`enabled`, `ask`)."""
    if not policy.rule(asked.tool).enabled:
        return _refused(f"tool {asked.tool} is disabled by the policy")
    return ALLOW


_SOURCES: dict[Source, Callable[[ToolPolicy, Asked], Decision]] = {
    "builtin": _builtin,
    "mcp": _mcp,
    "local": _local,
    "host": _host,
}
