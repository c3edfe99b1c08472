"""Idempotency keys: what lets the outside world recognise a retry of an effect it already saw.

An activity that was running when its worker died is retried by Temporal under the same activity
id, so a key made from the run and that id is the same for every attempt of one step's call and
differs between steps, rounds and runs (each scheduled activity has its own id).
"""

from __future__ import annotations

import hashlib

from temporalio import activity

ENV = "AGENTRUN_IDEMPOTENCY_KEY"
HEADER = "Idempotency-Key"


def current() -> str:
    """The running activity's key ("" outside an activity): ASCII, so it fits any header."""
    if not activity.in_activity():
        return ""
    info = activity.info()
    made_of = f"{info.workflow_id}\n{info.workflow_run_id}\n{info.activity_id}"
    return "agentrun-" + hashlib.sha256(made_of.encode()).hexdigest()[:32]


def as_env() -> dict[str, str]:
    key = current()
    return {ENV: key} if key else {}


def as_header() -> dict[str, str]:
    key = current()
    return {HEADER: key} if key else {}
