"""`python -m agentrun.client …`: the client's commands (see agentrun.cli)."""

from agentrun import handoff

if __name__ == "__main__":
    handoff.main("client")
