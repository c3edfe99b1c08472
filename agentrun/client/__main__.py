"""`python -m agentrun.client …`: the client's commands (see agentrun.cli)."""

from agentrun import launcher

if __name__ == "__main__":
    launcher.main("client")
