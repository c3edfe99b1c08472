"""The base of every error a person can fix: the CLI prints it in one line and exits with its code.

It lives apart from the modules that raise it so the command line can catch them all without
importing the Temporal client, the worker or the languages that define them."""

from __future__ import annotations

EXIT_USAGE, EXIT_UNREACHABLE = 2, 3


class UserError(Exception):
    """A bad spec, a bad argument, an unknown run: said once, no traceback."""

    exit_code = EXIT_USAGE

    def message(self) -> str:
        return f"error: {self}"


class UsageError(UserError):
    """A mistake on the command line (exit code 2)."""


class Unavailable(UserError):
    """Something the command needs is not there right now (Temporal, a worker, a stored value)."""

    exit_code = EXIT_UNREACHABLE
