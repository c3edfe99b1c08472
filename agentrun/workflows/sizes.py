"""How big a run's values may grow. A value sent over the limit would fail the workflow task on every
retry and leave the run spinning for ever, so the workflow measures before sending and fails the
node that would cross the line instead, saying how big it was.

Runs recorded before large values went by reference were held to what Temporal carries inline (2 MB
per payload) and replay with those limits; newer runs keep spec.sizes' limits, which are about a
worker's memory and a store's largest object.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic_core import to_json
from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter

from agentrun.models.sizes import MAX_SENT_BYTES, MAX_STATE_BYTES, megabytes

__all__ = [
    "StateBound",
    "limit_passed",
    "megabytes",
    "payload_bytes",
    "payload_of",
    "sent_limit",
    "state_limit",
    "value_bytes_bound",
]

BY_REFERENCE = "large-values-by-reference"
INLINE_PAYLOAD_LIMIT = 2 * 1024 * 1024  # Temporal's error limit per payload (it warns from 512 KB)
# The state went out whole several times (result or failure details, memo, queries); below this it
# still fitted with the reason of a failure added to it.
INLINE_STATE_LIMIT = 1_800_000
# A node's value lands in the state a few times over (steps.<id>.output and .outputs, memory, its
# task row, outputs) and the node adds its row, counters and notes besides: a generous bound of both.
# A task adds about 500 bytes besides its value. Runs recorded before NODE_BOUND allowed 64 KB a node,
# which serialised a 200-task chain's whole state (90 KB, 0.8 ms) every 27 nodes; 16 KB, every 110.
VALUE_COPIES = 8
NODE_BYTES = 16 * 1024
NODE_BYTES_BEFORE = 64 * 1024
NODE_BOUND = "state-bound-16k-a-node"


def payload_bytes(value: Any) -> int:
    """How big `value` is as Temporal would carry it: the same bytes the run's converter sends."""
    return payload_of(value).ByteSize()


def payload_of(value: Any) -> Payload:
    """`value` as the run's converter would send it. A text, model or collection is JSON from
    pydantic there; converted here without the converter's context set up for each value."""
    if isinstance(value, (str, BaseModel, dict, list)) and (payload := _JSON.to_payload(value)) is not None:
        return payload
    return workflow.payload_converter().to_payloads([value])[0]


_JSON = PydanticJSONPlainPayloadConverter()  # the converter's own part for these values


def value_bytes_bound(value: Any) -> int:
    """At least `value`'s payload_bytes, for the state bound. A text, most often an agent's reply, is
    counted as its JSON and the most a payload's framing adds to it, without building the payload."""
    if isinstance(value, str):
        return len(to_json(value)) + PAYLOAD_FRAMING
    return payload_bytes(value)


PAYLOAD_FRAMING = 32  # the `json/plain` encoding entry (24 bytes) and the data's tag and length (≤ 6)


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


class StateBound:
    """An upper bound of the run's state size since it was last measured, so that the state is
    serialised whole only when it could be near the inline limit, not after every node (that made
    a chain of N nodes cost N² in the workflow task). Below the limit nothing is decided, so a
    check skipped there is a check that would have passed."""

    def __init__(self) -> None:
        self.bound: int | None = None  # unknown until measured once
        self.node_bytes: int | None = None  # what a node may add besides its value, once asked

    def may_pass(self, value_bytes: int) -> bool:
        if self.bound is None:
            return True
        if self.node_bytes is None:
            self.node_bytes = NODE_BYTES if workflow.patched(NODE_BOUND) else NODE_BYTES_BEFORE
        self.bound += VALUE_COPIES * value_bytes + self.node_bytes
        return self.bound > INLINE_STATE_LIMIT

    def measured(self, size: int) -> None:
        self.bound = size
