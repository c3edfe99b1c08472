"""What fits in Temporal: one payload (an activity's input, the run's state as the workflow's
result, memo and failure details) may not pass 2 MB. Over it the SDK fails the workflow task on
every retry and the run spins for ever, so the workflow measures before sending and fails the node
that would cross the line instead, saying how big it was.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

from agentrun.spec.sizes import megabytes

__all__ = ["MAX_STATE_BYTES", "PAYLOAD_LIMIT", "megabytes", "payload_bytes"]

PAYLOAD_LIMIT = 2 * 1024 * 1024  # Temporal's error limit per payload (it warns from 512 KB)
# The state goes out whole several times (result or failure details, memo, queries); below this it
# still fits with the reason of a failure added to it.
MAX_STATE_BYTES = 1_800_000


def payload_bytes(value: Any) -> int:
    """How big `value` is as Temporal would carry it: the run's own converter, so the same as sent."""
    return workflow.payload_converter().to_payloads([value])[0].ByteSize()
