"""What goes wrong with large values, in words a person can act on."""

from __future__ import annotations

from agentrun.errors import Unavailable, UserError


class BadBlobSetting(UserError, ValueError):
    """AGENTRUN_BLOB_URL or AGENTRUN_BLOB_THRESHOLD is not usable (exit code 2)."""


class BlobUnreadable(Unavailable, RuntimeError):
    """A value history refers to cannot be fetched from where it was stored (exit code 3)."""
