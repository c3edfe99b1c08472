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

Pure text: no file, clock or network is read (the worker's home only for a `~` pattern), so the
workflow may decide too. What is decided on the file itself at the moment of access (a path inside
the work directory, a link, a protected file, an address) stays with the tools."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from agentrun.lang.grants import SAVE_TO_MEMORY
from agentrun.models.tools import ToolPolicy
from agentrun.policy import commands, paths

# "ask" (a person approves first) is the verdict to come; a caller runs a call only on "allow".
Verdict = Literal["allow", "refuse"]
Source = Literal["builtin", "mcp", "local"]

PATH_TOOLS = frozenset({"read", "write", "edit", "glob", "grep", "ls"})
WEB_TOOLS = frozenset({"web_fetch"})
NO_MCP_TABLE = (
    "the policy has no [mcp] table: every MCP tool is allowed (add one with default_deny = true to narrow it)"
)


@dataclass(frozen=True)
class Decision:
    """The policy's answer: `reason` says why a call is refused, for the model to read; `warning`,
    something the operator should hear of a call that runs."""

    verdict: Verdict
    reason: str = ""
    warning: str = ""

    @property
    def allowed(self) -> bool:
        return self.verdict == "allow"


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
    """Whether the call may run, and if not why."""
    return _SOURCES[asked.source](policy, asked)


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


def _local(policy: ToolPolicy, asked: Asked) -> Decision:
    key = asked.arguments.get("key")
    if asked.tool == SAVE_TO_MEMORY and isinstance(key, str) and key.startswith("_"):
        return _refused(f"memory keys starting with '_' are reserved; '{key}' was not saved")
    return ALLOW


_SOURCES: dict[Source, Callable[[ToolPolicy, Asked], Decision]] = {
    "builtin": _builtin,
    "mcp": _mcp,
    "local": _local,
}
