"""What each kind of agent can do, by the scheme of its URI: the one table the CLI, the workflow
and the activities read, so no other module names a scheme."""

from __future__ import annotations

import os
from dataclasses import dataclass

from agentrun.lang.agent_uri import AgentUri


@dataclass(frozen=True)
class Driver:
    scheme: str
    # A chat API that remembers nothing: the engine keeps the conversation and sends it with each
    # prompt, and the same model can judge a rule of no known form.
    chat: bool
    # `agent_lifecycle: refresh` starts a fresh agent for each task and stops it once the task ends.
    restarts: bool
    about: str
    # Offered function tools the model may call (spawn_agents); other agents write a fenced block.
    tools: bool = False


@dataclass(frozen=True)
class Endpoint:
    """Where a chat-API driver sends prompts, and the environment variables that say so: the driver
    reads them, and `start` checks them before the run's first prompt (client.endpoints)."""

    key_env: str
    url_env: str
    default_url: str

    def url(self) -> str:
        return (os.environ.get(self.url_env) or self.default_url).rstrip("/")

    def key(self) -> str | None:
        return os.environ.get(self.key_env)


ENDPOINTS: dict[str, Endpoint] = {
    "openai": Endpoint("OPENAI_API_KEY", "OPENAI_BASE_URL", "https://api.openai.com/v1"),
    "anthropic": Endpoint("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "https://api.anthropic.com"),
}


DRIVERS: dict[str, Driver] = {
    d.scheme: d
    for d in (
        Driver("agentapi", chat=False, restarts=True, about="a coding agent behind agentapi"),
        Driver("openai", chat=True, restarts=False, about="an OpenAI-compatible chat completions API", tools=True),
        Driver("anthropic", chat=True, restarts=False, about="Anthropic's messages API", tools=True),
        Driver("command", chat=False, restarts=False, about="a local program, the prompt on its stdin"),
        Driver("scripted", chat=False, restarts=False, about="recorded replies from a file"),
    )
}
SCHEMES = tuple(DRIVERS)
_UNKNOWN = Driver("", chat=False, restarts=False, about="")


def driver_of(uri: str) -> Driver:
    """The driver a URI names; an unknown scheme can do nothing special (the activity refuses it)."""
    return DRIVERS.get(AgentUri.parse(uri).scheme, _UNKNOWN)


def agent_type(uri: str) -> str:
    """The kind of agent, as cyberian's `agent_type` template variable reads: agentapi's `type=`."""
    scheme, rest = AgentUri.parse(uri)
    if scheme == "agentapi" and "type=" in rest:
        return rest.partition("type=")[2].partition("&")[0]
    return scheme


def model_of(uri: str) -> str:
    """The model a URI names after its scheme (`openai:gpt-4o` → `gpt-4o`), for price lookups
    when a reply does not say which model answered."""
    return AgentUri.parse(uri).rest
