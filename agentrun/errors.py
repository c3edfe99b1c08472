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


class NoSuchRun(UserError):
    """No run has the id given."""


class NoWorker(Unavailable):
    """No worker took what was sent to a run in time (exit code 3)."""


class Refused(UsageError):
    """The run refused an update; the message is its reason."""


class ExecutionError(Exception):
    """What an MCP tool call on a driven run answers with when it cannot be done: one line for the agent."""
