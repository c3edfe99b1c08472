"""`python -m agentrun.client …`: the client's commands (see agentrun.cli)."""

from agentrun.cli import client, exit_with

if __name__ == "__main__":
    exit_with(client)
