"""How people call the commands, so hints name them the way they were typed: `agentrun …` after
`agentrun`, `python -m client …` after `python -m client` (the spelling a checkout's README uses)."""

from __future__ import annotations

CLIENT = "python -m client"  # agentrun.cli sets "agentrun"


def client() -> str:
    return CLIENT


def worker() -> str:
    return "agentrun worker" if CLIENT == "agentrun" else "python -m worker"


def called_as_agentrun() -> None:
    global CLIENT
    CLIENT = "agentrun"
