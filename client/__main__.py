"""`python -m client …` is `agentrun …` (AGENTRUN-SHIM)."""

from agentrun.cli import client, exit_with

exit_with(client)
