"""Before a run this process serves starts: can its worker reach the models the run's agents name?
A missing API key or an endpoint nobody answers on is said at once, with the variable to set,
rather than after the agent's first prompt has retried for a while.

Only the process that runs the worker can tell: a worker elsewhere has its own environment, so
`start` asks this only when its own worker takes the run.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable
from urllib.parse import urlsplit

from agentrun.lang.check import agent_ids
from agentrun.lang.errors import Problem, SpecError
from agentrun.models.contract import RunInput
from agentrun.models.drivers import ENDPOINTS, AgentUri, Endpoint

CONNECT_S = 2.0  # a local server answers a connection at once; a remote one well within this


OFFLINE = "or run it offline with --agent scripted:REPLIES.yaml (recorded replies) or --agent 'command:CMD'"


def uris(inp: RunInput) -> list[tuple[str, str]]:
    """(agent id, URI) for every agent the run may talk to."""
    return [(agent, inp.agents.get(agent) or inp.default_agent) for agent in sorted(agent_ids(inp.plan))]


async def check(uris: Iterable[tuple[str, str]]) -> None:
    """Raise SpecError naming the agents whose models cannot be reached from here, one problem per
    endpoint."""
    by_scheme: dict[str, list[tuple[str, str]]] = {}
    for agent, uri in sorted(set(uris)):
        scheme = AgentUri.parse(uri).scheme
        if scheme in ENDPOINTS:
            by_scheme.setdefault(scheme, []).append((agent, uri))
    found = [await _problem(ENDPOINTS[scheme], users) for scheme, users in sorted(by_scheme.items())]
    problems = [p for p in found if p is not None]
    if problems:
        raise SpecError(problems)


async def _problem(endpoint: Endpoint, users: list[tuple[str, str]]) -> Problem | None:
    """What keeps the agents `users` ((agent id, URI), all of one scheme) from their model, if anything."""
    names = ", ".join(f"'{agent}'" for agent, _ in users)
    who = f"agent{'s' if len(users) > 1 else ''} {names}"
    talks = " talks" if len(users) == 1 else " talk"
    uris = ", ".join(sorted({uri for _, uri in users}))
    given = os.environ.get(endpoint.url_env)
    if not given and not os.environ.get(endpoint.key_env):
        return Problem(
            f"--agent {uris}",
            0,
            0,
            f"{who}{talks} to {uris}, but {endpoint.key_env} is not set",
            f"set {endpoint.key_env}, or {endpoint.url_env} to a compatible server of your own; {OFFLINE}",
        )
    url = given or endpoint.default_url
    where = urlsplit(url)
    port = where.port or (443 if where.scheme == "https" else 80)
    if not where.hostname or not await _answers(where.hostname, port):
        return Problem(
            f"--agent {uris}",
            0,
            0,
            f"{who}{talks} to {uris} at {url}, which does not answer",
            f"start that server, or set {endpoint.url_env} to one that runs; {OFFLINE}",
        )
    return None


async def _answers(host: str, port: int) -> bool:
    try:
        _reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), CONNECT_S)
    except (OSError, TimeoutError):
        return False
    writer.close()
    return True
