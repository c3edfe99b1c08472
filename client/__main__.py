"""`python -m client …` is `agentrun …` (AGENTRUN-SHIM)."""

from agentrun import launcher

launcher.main("client")
