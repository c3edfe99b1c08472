"""`python -m client …` is `agentrun …` (AGENTRUN-SHIM)."""

from agentrun import handoff

handoff.main("client")
