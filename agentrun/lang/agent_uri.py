"""An agent URI as a spec names it (`openai:gpt-4o`): its scheme and the rest."""

from __future__ import annotations

from typing import NamedTuple


class AgentUri(NamedTuple):
    """An agent URI read once: its scheme (which driver talks to the agent) and the rest, which
    only that driver reads (`openai:gpt-4o` is scheme `openai`, rest `gpt-4o`). A URI without a ':'
    is all scheme, with nothing after it."""

    scheme: str
    rest: str

    @classmethod
    def parse(cls, uri: str) -> AgentUri:
        scheme, _, rest = uri.partition(":")
        return cls(scheme, rest)
