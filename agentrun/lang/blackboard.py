"""A behaviour tree's blackboard: the names steps use for its values, and reading and writing them.

`$VAR.x` (abtree: `$LOCAL.x`) is a value steps read and write; `$CONST.x` (`$GLOBAL.x`) a read-only
one. Paths are dotted: `$VAR.report.score`.
"""

from __future__ import annotations

import re
from typing import Any

NAMED = re.compile(r"\$(VAR|LOCAL|CONST|GLOBAL)\.([A-Za-z_][\w-]*(?:\.[\w-]+)*)")
MISSING = object()


def is_constant(scope: str) -> bool:
    return scope in ("CONST", "GLOBAL")


def lookup(values: dict[str, Any], path: str) -> Any:
    """The value at a dotted path, or MISSING."""
    value: Any = values
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return MISSING
        value = value[part]
    return value


def write(values: dict[str, Any], path: str, value: Any) -> None:
    """Set a dotted path in `values`, making the mappings on the way."""
    *parents, last = path.split(".")
    target = values
    for part in parents:
        child = target.get(part)
        if not isinstance(child, dict):
            child = target[part] = {}
        target = child
    target[last] = value


def var_path(name: str) -> str:
    """A write's path without the scope a reply may have put in front of it ($VAR.x, $LOCAL.x)."""
    for prefix in ("$VAR.", "$LOCAL."):
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def const_refusal(name: str, constants: dict[str, Any]) -> str | None:
    """Why a $VAR write may not go ahead: it names a constant."""
    if name.startswith(("$CONST.", "$GLOBAL.")):
        return f"{name} is read-only: $CONST values cannot be written"
    root = var_path(name).split(".")[0]
    if root in constants:
        return f"'{root}' is a $CONST value and read-only; store results under another $VAR name"
    return None
