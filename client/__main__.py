"""`python -m client …` is `agentrun …` (AGENTRUN-SHIM)."""

from agentrun.client.__main__ import exit_with, main

exit_with(main)
