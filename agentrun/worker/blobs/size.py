"""How big a stored value is, in the words Temporal Web shows beside its reference."""

from __future__ import annotations

from agentrun.models.sizes import megabytes


def size_text(size: int) -> str:
    """`10.5 MB (10485823 bytes)`: the rounded figure to read, the exact one to compare."""
    return f"{megabytes(size)} ({size} bytes)"
