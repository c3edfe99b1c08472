"""Durations as users write them: 90, "90s", "30m", "2h", "1h30m"."""

from __future__ import annotations

import re

_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)")
_UNIT = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


# A run waits weeks at most; a longer limit (or one of zero or less) is a mistake that would
# otherwise fail every workflow task of the run, so it is refused when the spec is read.
MAX_SECONDS = 365 * 86400


def parse_duration(value: object) -> float:
    """Seconds in `value`, more than 0 and at most a year; raises ValueError with the accepted forms."""
    seconds = _seconds(value)
    if not 0 < seconds <= MAX_SECONDS:
        raise ValueError(f"{value!r} is not a duration from 1ms to a year (365d)")
    return seconds


def _seconds(value: object) -> float:
    if isinstance(value, bool):
        raise ValueError("a duration, like 90, '90s', '30m' or '2h'")
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip().lower().replace(" ", "")
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    parts = _PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"'{value}' is not a duration; write 90, '90s', '30m' or '2h'")
    return sum(float(n) * _UNIT[u] for n, u in parts)
