"""Turn pydantic validation errors on loaded YAML into Problems with positions and hints."""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import BaseModel, ValidationError

from spec.errors import Problem
from spec.yamlpos import position


def problems_from(exc: ValidationError, data: Any, file: str, model: type[BaseModel],
                  base: tuple = ()) -> list[Problem]:
    problems = []
    for err in exc.errors():
        loc = base + tuple(err["loc"])
        line, col = position(data, loc)
        problems.append(Problem(file, line, col, _message(err, loc), _hint(err, loc, model)))
    return problems


def _message(err: dict, loc: tuple) -> str:
    where = ".".join(str(p) for p in loc)
    if err["type"] == "extra_forbidden":
        return f"unknown key '{loc[-1]}'"
    if err["type"] == "missing":
        return f"'{where}' is required"
    return f"{where}: {err['msg']}"


def _hint(err: dict, loc: tuple, model: type[BaseModel]) -> str:
    if err["type"] == "extra_forbidden":
        allowed = _allowed_keys(model, loc[:-1])
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1, cutoff=0.6)
        if close:
            return f"did you mean '{close[0]}'?"
        return "allowed keys here: " + ", ".join(sorted(allowed)) if allowed else ""
    if err["type"] in ("dict_type", "model_type"):
        return "expected a mapping (key: value lines indented under this key)"
    if err["type"] == "list_type":
        return "expected a list (lines starting with '- ')"
    if err["type"] == "string_type":
        return "expected text; quote it if it looks like a number, a boolean or a mapping"
    return ""


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
