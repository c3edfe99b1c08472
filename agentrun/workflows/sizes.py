"""How big a run's values may grow. A value sent over the limit would fail the workflow task on every
retry and leave the run spinning for ever, so the workflow measures before sending and fails the
node that would cross the line instead, saying how big it was.

Runs recorded before large values went by reference were held to what Temporal carries inline (2 MB
per payload) and replay with those limits; newer runs keep spec.sizes' limits, which are about a
worker's memory and a store's largest object.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

from agentrun.lang.sizes import MAX_SENT_BYTES, MAX_STATE_BYTES, megabytes

__all__ = ["limit_passed", "megabytes", "payload_bytes", "sent_limit", "state_limit"]

BY_REFERENCE = "large-values-by-reference"
INLINE_PAYLOAD_LIMIT = 2 * 1024 * 1024  # Temporal's error limit per payload (it warns from 512 KB)
# The state went out whole several times (result or failure details, memo, queries); below this it
# still fitted with the reason of a failure added to it.
INLINE_STATE_LIMIT = 1_800_000


def payload_bytes(value: Any) -> int:
    """How big `value` is as Temporal would carry it: the run's own converter, so the same as sent."""
    return workflow.payload_converter().to_payloads([value])[0].ByteSize()


def state_limit(size: int) -> int | None:
    """The limit a run's state of `size` bytes passes, or None."""
    return limit_passed(size, INLINE_STATE_LIMIT, MAX_STATE_BYTES)


def sent_limit(size: int) -> int | None:
    """The limit an activity input of `size` bytes passes, or None."""
    return limit_passed(size, INLINE_PAYLOAD_LIMIT, MAX_SENT_BYTES)


def limit_passed(size: int, inline: int, by_reference: int) -> int | None:
    # The patch is asked only past the inline limit, so runs that never get there record no marker.
    if size <= inline:
        return None
    limit = by_reference if workflow.patched(BY_REFERENCE) else inline
    return limit if size > limit else None
