"""Which process the user started: not this one in a fork of the fork server, which runs the command
on the caller's behalf. The worker names that pid as its identity. Imports only os."""

from __future__ import annotations

import os

# Set in a fork of the fork server: the pid of the process the user started, whose command it runs.
caller: int | None = None


def caller_pid() -> int:
    """The pid of the process the user started: the caller's in a fork of the fork server, else ours."""
    return caller or os.getpid()
