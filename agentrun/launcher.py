"""Where a command runs: `start`, `fork` and `watch --worker` go to the fork server
(agentrun.handoff) when one takes them; every other command, and those when none does, run here.

Every command imports this module first, so it imports only os and sys: the commands that are not
handed off start no slower for it.
"""

from __future__ import annotations

import os
import sys

ENV = "AGENTRUN_FORKSERVER"
HANDED = ("start", "fork")


def main(entry: str) -> None:
    """Run the command line `entry` ("client" for `python -m client`, "agentrun") with sys.argv."""
    argv = sys.argv[1:]
    if wanted(argv):
        from agentrun import handoff

        code = handoff.hand_off(entry, argv)
        if code is not None:
            os._exit(code)
        handoff.start_server()  # none took it: this command runs here, the next one will not
    from agentrun import cli

    cli.exit_with(lambda: cli.run_as(entry, argv))


def wanted(argv: list[str]) -> bool:
    """Is this a command that loads what serves a run (start, fork, watch --worker), with the fork
    server allowed and possible here (Linux)?"""
    if os.environ.get(ENV, "").strip().lower() in ("0", "off", "false", "no") or sys.platform != "linux":
        return False
    if not argv or "-h" in argv or "--help" in argv:
        return False
    return argv[0] in HANDED or (argv[0] == "watch" and "--worker" in argv)
