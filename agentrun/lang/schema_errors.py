"""Turn pydantic validation errors on loaded YAML into Problems with positions and hints."""

from __future__ import annotations

import difflib
import re
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from agentrun.lang.errors import Problem, did_you_mean
from agentrun.lang.yamlpos import position

# Past this many, more problems say nothing new (and a file of 50,000 unknown keys is no spec).
MAX_PROBLEMS = 20


def problems_from(
    exc: ValidationError, data: Any, file: str, model: type[BaseModel], value_hints: dict[str, str] | None = None
) -> list[Problem]:
    """One problem per mistake, each with a hint: a misspelled or misplaced key is reported once, as
    the unknown key, not again as the required key it should have been. `value_hints` are hints for
    values a validator refused, by the key holding the value."""
    errors = exc.errors()
    unknown = [e["loc"] for e in errors if e["type"] == "extra_forbidden"]
    problems: list[Problem] = []
    for err in errors:
        loc = tuple(err["loc"])
        if len(problems) == MAX_PROBLEMS:
            line, col = position(data, loc)
            more = f"{len(errors) - MAX_PROBLEMS} more problems like these are not listed"
            problems.append(Problem(file, line, col, more, "fix the ones above first; the rest are often the same"))
            break
        if err["type"] == "missing" and any(_explains(u, loc) for u in unknown):
            continue
        line, col = position(data, loc)
        hint = (value_hints or {}).get(str(loc[-1])) if err["type"] == "value_error" else None
        problems.append(Problem(file, line, col, _message(err, loc), hint or _hint(err, loc, model, errors)))
    return problems


def _explains(unknown: tuple, missing: tuple) -> bool:
    """Whether the unknown key at `unknown` is the `missing` key misspelled beside it, or put elsewhere."""
    if unknown[-1] == missing[-1]:
        return True
    return unknown[:-1] == missing[:-1] and bool(difflib.get_close_matches(str(unknown[-1]), [missing[-1]]))


def _message(err: ErrorDetails, loc: tuple) -> str:
    where = ".".join(str(p) for p in loc)
    if err["type"] == "extra_forbidden":
        return f"unknown key '{loc[-1]}'"
    if err["type"] == "missing":
        return f"'{where}' is required"
    return f"{where}: {err['msg'].removeprefix('Value error, ')}"


def _hint(err: ErrorDetails, loc: tuple, model: type[BaseModel], errors: list[ErrorDetails]) -> str:
    name = loc[-1]
    if err["type"] == "extra_forbidden":
        owner = next(
            (m["loc"] for m in errors if m["type"] == "missing" and m["loc"][-1] == name and m["loc"][:-1] != loc[:-1]),
            None,
        )
        if owner is not None:
            return f"'{name}:' belongs under '{_parent(owner)}:'; check its indentation"
        allowed = _allowed_keys(model, loc[:-1])
        return did_you_mean(str(name), allowed) or (
            "allowed keys here: " + ", ".join(sorted(allowed)) if allowed else ""
        )
    if err["type"] in ("dict_type", "model_type"):
        return "expected a mapping (key: value lines indented under this key)"
    if err["type"] == "list_type":
        return "expected a list (lines starting with '- ')"
    if err["type"] == "string_type":
        return "expected text; quote it if it looks like a number, a boolean or a mapping"
    if err["type"] == "missing":
        return f"add '{name}:' under '{_parent(loc)}:'"
    if err["type"] == "literal_error":
        choices = re.findall(r"'([^']*)'", err.get("ctx", {}).get("expected", ""))
        return did_you_mean(str(err["input"]), choices) or "write one of: " + ", ".join(choices)
    if err["type"] == "too_short":
        return f"list at least one entry under '{name}:'"
    if err["type"] == "greater_than_equal":
        return f"use a whole number of at least {err.get('ctx', {}).get('ge')}"
    if err["type"] == "less_than_equal":
        return f"use a whole number of at most {err.get('ctx', {}).get('le')}"
    return ""


def _parent(loc: tuple) -> str:
    """The key whose mapping `loc` is in (list indexes skipped)."""
    return next((str(p) for p in reversed(loc[:-1]) if isinstance(p, str)), "the top level")


def _allowed_keys(model: type[BaseModel], loc: tuple) -> list[str]:
    """Walk the model along loc (skipping dict keys and list indexes) to the model at that place."""
    current: Any = model
    for part in loc:
        fields = getattr(current, "model_fields", None)
        if fields is None:
            continue
        if part in fields:
            current = _inner_model(fields[part].annotation) or current
    fields = getattr(current, "model_fields", {})
    return [f.alias or name for name, f in fields.items()]


def _inner_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _inner_model(arg)
        if found:
            return found
    return None
