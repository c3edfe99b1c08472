"""`python -m agentrun`: the `agentrun` command."""

from agentrun.cli import main

main()
