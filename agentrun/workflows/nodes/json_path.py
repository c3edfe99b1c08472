"""The JSON paths a verifier reads memory with: `$.a.b[0].c` and `$['key with spaces']`."""

from __future__ import annotations

import re
from typing import Any

MISSING: Any = object()  # the path leads nowhere (unlike a null found there)
_STEP = re.compile(r"\.([A-Za-z_][\w-]*)|\[(\d+)\]|\['([^']*)'\]|\[\"([^\"]*)\"\]")


class JsonPathError(ValueError):
    pass


def read_path(path: str, data: Any) -> Any:
    """The value at `path` in `data`, or MISSING; JsonPathError for a path of no known form."""
    text = path.strip()
    if not text.startswith("$"):
        raise JsonPathError(f"JSON path '{path}' must start with $ (for example $.review.score)")
    at, value = 1, data
    while at < len(text):
        match = _STEP.match(text, at)
        if match is None:
            raise JsonPathError(f"JSON path '{path}' cannot be read at character {at + 1}")
        name, index, quoted, dquoted = match.groups()
        value = _step(value, index, name or quoted or dquoted)
        if value is MISSING:
            return MISSING
        at = match.end()
    return value


def _step(value: Any, index: str | None, name: str | None) -> Any:
    if index is not None:
        return value[int(index)] if isinstance(value, list) and int(index) < len(value) else MISSING
    return value.get(name, MISSING) if isinstance(value, dict) else MISSING
