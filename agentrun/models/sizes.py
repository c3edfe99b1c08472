"""Sizes as people read them, and the limits both the workflow and the activities keep.

Values over AGENTRUN_BLOB_THRESHOLD are stored outside Temporal's history (which refuses a payload
over 2 MB), so these limits are about memory: what one worker holds of a run, and what a store
takes as one object (the S3 driver's default is 50 MiB).
"""

from __future__ import annotations

MAX_RESULT_BYTES = 16_000_000  # one step's result: an agent's reply, a provider's output
MAX_STATE_BYTES = 32_000_000  # the run's state: every output later templates may read
MAX_SENT_BYTES = 48_000_000  # one activity's input: a prompt with the conversation before it


def megabytes(size: int) -> str:
    return f"{size / 1_000_000:.1f} MB"
