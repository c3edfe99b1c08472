"""`python -m agentrun` and the `agentrun` command."""

from agentrun import launcher


def main() -> None:
    launcher.main("agentrun")


if __name__ == "__main__":
    main()
