"""Which agent URI each agent id uses: --agent flags, then agentrun.yaml's `agents:`, then the URI
its `capabilities:` give the capability an Agentfile agent REQUIRES, then the default (--agent URI,
agentrun.yaml's `default`, AGENTRUN_AGENT).

agentrun.yaml may also hold `prices:` (US dollars per million tokens by model), for every spec
next to it; a spec's own `prices:` win.
"""

from __future__ import annotations

import os
import re
from collections.abc import Set as AbstractSet
from pathlib import Path

import yaml
from pydantic import TypeAdapter, ValidationError

from agentrun.ids import AgentId
from agentrun.lang import ir
from agentrun.lang.agent_uri import AgentUri
from agentrun.lang.errors import Problem, SpecError
from agentrun.lang.mcp_servers import McpServer, read_servers
from agentrun.lang.yamlpos import load_yaml
from agentrun.models.drivers import SCHEMES
from agentrun.models.host_tools import HostBinding

CONFIG_NAME = "agentrun.yaml"
_PER_AGENT = re.compile(r"^([A-Za-z_][\w.-]*)=(.+)$")


def resolve(
    flags: list[str],
    spec_dir: str,
    needed: AbstractSet[AgentId] = frozenset(),
    required: bool = True,
    requires: dict[str, str] | None = None,
    declared: dict[str, str] | None = None,
) -> tuple[str, dict[str, str]]:
    """(default URI, per-agent URIs). `--agent URI` sets the default, `--agent ID=URI` one agent;
    `requires` maps agent ids to the capability each asks for (an Agentfile's REQUIRES);
    `declared` the URIs a spec names for its agents (a graph bundle's models), used for the
    agents nothing else gives one when no default is set either.

    No default is needed when every agent id in `needed` has its own URI (so none for a spec whose
    steps talk to no agent, only providers), nor when not `required` (a dry run calls no agent):
    then the default is "".
    """
    path, data = _config_file(spec_dir)
    per_agent = _config(path, data)
    capable = _capabilities(path, data)
    for agent, capability in (requires or {}).items():
        if agent not in per_agent and capability in capable:
            per_agent[agent] = capable[capability]
    default = per_agent.pop("default", None) or os.environ.get("AGENTRUN_AGENT")
    for flag in flags:
        match = _PER_AGENT.match(flag)
        if match and ":" not in match.group(1):
            per_agent[match.group(1)] = match.group(2)
        else:
            default = flag
    for uri in [default, *per_agent.values()]:
        if uri is not None:
            _check_uri(uri)
    if default is None:
        default = per_agent.get("default")
    if default is None:
        per_agent = {**(declared or {}), **per_agent}
    if default is None and (not required or needed <= set(per_agent)):
        default = ""
    if default is None:
        unset = sorted(needed - set(per_agent))
        about = f" (agents without one: {', '.join(unset)})" if per_agent and unset else ""
        raise SpecError(
            [
                Problem(
                    "--agent",
                    0,
                    0,
                    "no agent is configured for this run" + about,
                    "pass --agent URI, e.g. --agent openai:gpt-4o-mini, --agent "
                    "agentapi:http://127.0.0.1:3284 or --agent 'command:my-agent --flag', "
                    f"or put agents: {{default: URI}} in {CONFIG_NAME} next to the spec",
                )
            ]
        )
    return default, per_agent


def _check_uri(uri: str) -> None:
    scheme = AgentUri.parse(uri).scheme
    if scheme not in SCHEMES or ":" not in uri:
        raise SpecError(
            [
                Problem(
                    "--agent",
                    0,
                    0,
                    f"'{uri}' is not an agent URI",
                    "agent URIs start with one of: " + ", ".join(s + ":" for s in SCHEMES),
                )
            ]
        )


def prices(spec_dir: str) -> dict[str, ir.Price]:
    """The price table of the agentrun.yaml that applies to a spec, if it has one."""
    path, data = _config_file(spec_dir)
    try:
        return _PRICES.validate_python(data.get("prices") or {})
    except ValidationError as exc:
        raise SpecError(
            [
                Problem(
                    str(path),
                    1,
                    1,
                    f"'prices' in {CONFIG_NAME}: {exc.errors()[0]['msg']}",
                    "prices:\n    gpt-4o-mini: {input: 0.15, output: 0.6}   # USD per million tokens",
                )
            ]
        ) from None


_PRICES = TypeAdapter(dict[str, ir.Price])


def mcp_servers(spec_dir: str, declared: dict[str, McpServer] | None = None) -> dict[str, McpServer]:
    """The MCP servers a run may reach: agentrun.yaml's `mcp_servers:`, then the spec's own
    declarations, which win for an id both name."""
    path, _ = _config_file(spec_dir)
    found: dict[str, McpServer] = {}
    if path is not None:
        data = load_yaml(path.read_text(), str(path)) or {}
        if isinstance(data, dict) and data.get("mcp_servers") is not None:
            line = getattr(data, "key_pos", {}).get("mcp_servers", (1, 1))[0]
            found = read_servers(data["mcp_servers"], str(path), line)
    return {**found, **(declared or {})}


HOST_TOOLS_HINT = (
    "host_tools:\n    fetch_market_data: {mcp: market:get_figures}   # a declared MCP server's tool\n"
    '    lookup: {command: "python3 lookup.py", description: ..., input_schema: {...}}   # JSON on stdin'
)


def host_tools(spec_dir: str) -> dict[str, HostBinding]:
    """The host tools agentrun.yaml binds (`host_tools:`), by name: each an MCP server's tool or a
    command, not both."""
    path, data = _config_file(spec_dir)
    raw = data.get("host_tools") or {}
    found: dict[str, HostBinding] = {}
    wrong = "" if isinstance(raw, dict) else "'host_tools' must map tool names to bindings"
    for name, value in raw.items() if not wrong else []:
        try:
            binding = HostBinding.model_validate(value)
        except ValidationError as exc:
            wrong = f"host tool '{name}' in {CONFIG_NAME}: {exc.errors()[0]['msg']}"
            break
        if bool(binding.mcp) == bool(binding.command) or (binding.mcp and not binding.tool):
            wrong = f"host tool '{name}' in {CONFIG_NAME} needs one of mcp: SERVER:TOOL or command: LINE"
            break
        found[str(name)] = binding
    if wrong:
        raise SpecError([Problem(str(path), 1, 1, wrong, HOST_TOOLS_HINT)])
    return found


def _config(path: Path | None, data: dict) -> dict[str, str]:
    agents = data.get("agents") or {}
    if not isinstance(agents, dict):
        raise SpecError(
            [Problem(str(path), 1, 1, "'agents' must map agent ids to URIs", "agents:\n    default: command:my-agent")]
        )
    return {str(k): str(v) for k, v in agents.items()}


def _capabilities(path: Path | None, data: dict) -> dict[str, str]:
    found = data.get("capabilities") or {}
    if not isinstance(found, dict) or not all(isinstance(v, str) for v in found.values()):
        hint = 'capabilities:\n    reasoning-heavy: "openai:o3"\n    fast: "openai:gpt-4o-mini"'
        raise SpecError([Problem(str(path), 1, 1, "'capabilities' must map capability names to agent URIs", hint)])
    return {str(k): v for k, v in found.items()}


def config_path(spec_dir: str) -> Path | None:
    """The agentrun.yaml that applies to a spec (next to it, or in the current folder), if any."""
    return _config_file(spec_dir)[0]


def _config_file(spec_dir: str) -> tuple[Path | None, dict]:
    """The first agentrun.yaml next to the spec or in the current folder, and what it holds."""
    for folder in (Path(spec_dir), Path.cwd()):
        path = folder / CONFIG_NAME
        if path.is_file():
            return path, yaml.safe_load(path.read_text()) or {}
    return None, {}
