"""`python -m agentrun` and the `agentrun` command."""

from agentrun import handoff


def main() -> None:
    handoff.main("agentrun")


if __name__ == "__main__":
    main()
