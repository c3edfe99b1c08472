"""Sizes as people read them, for the limits both the workflow and the activities keep
(Temporal carries at most 2 MB in one payload)."""

from __future__ import annotations


def megabytes(size: int) -> str:
    return f"{size / 1_000_000:.1f} MB"
