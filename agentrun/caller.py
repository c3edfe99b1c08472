"""Who is calling: the process the user started (not this one in a fork of the fork server, which
runs the command on the caller's behalf; the worker names that pid as its identity), and the user's
name, kept with what they answer. Imports only os (and getpass for the name)."""

from __future__ import annotations

import os

# Set in a fork of the fork server: the pid of the process the user started, whose command it runs.
caller: int | None = None


def caller_pid() -> int:
    """The pid of the process the user started: the caller's in a fork of the fork server, else ours."""
    return caller or os.getpid()


def user() -> str:
    """The OS user's name, or "" where this uid has none (a bare container)."""
    import getpass  # only those who answer runs need it, not every command that starts

    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return ""
