"""Binding run parameters to a Plan's declared params: types, defaults, required ones."""

from __future__ import annotations

import json
import os
from typing import Any

import yaml

from agentrun.lang import ir
from agentrun.lang.errors import Problem, SpecError


def parse_cli_param(text: str) -> tuple[str, Any]:
    """`KEY=VALUE` with VALUE as a YAML scalar (42 is an int); `KEY=@FILE` reads FILE as text."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"-p {text!r}: expected KEY=VALUE or KEY=@FILE")
    if raw.startswith("@"):
        with open(raw[1:], encoding="utf-8") as fh:
            return key.strip(), fh.read()
    try:
        value = yaml.safe_load(raw) if raw else ""
    except yaml.YAMLError:
        value = raw
    return key.strip(), value if isinstance(value, (str, int, float, bool)) or value is None else raw


def bind(plan: ir.Plan, given: dict[str, Any]) -> dict[str, Any]:
    """All params for the run; SpecError naming every missing required param and bad value."""
    values: dict[str, Any] = dict(given)
    problems = []
    for name, param in plan.params.items():
        if name not in values:
            if param.required:
                problems.append(
                    Problem(
                        plan.source,
                        param.line,
                        1,
                        # An Agentfile's INPUT keeps the real parser's words.
                        f"required input missing: {name}"
                        if plan.dialect == "agentfile"
                        else f"missing required param '{name}'",
                        f"pass it with -p {name}=VALUE" + _example(param),
                    )
                )
                continue
            if param.default is not None:
                values[name] = param.default
            elif plan.undefined == "error":
                values[name] = ""  # where an unknown name is an error, an optional param reads as empty
            continue
        try:
            values[name] = coerce(values[name], param.type)
            if param.json_schema is not None:
                _conforms(values[name], param.json_schema)
        except ValueError as exc:
            problems.append(
                Problem(
                    plan.source,
                    param.line,
                    1,
                    f"param '{name}': {exc}",
                    f"pass a {param.type} value with -p {name}=VALUE",
                )
            )
    if problems:
        raise SpecError(problems)
    return values


def _conforms(value: Any, schema: dict[str, Any]) -> None:
    """ValueError with the first way `value` breaks its param's JSON Schema."""
    import jsonschema  # only a param with a schema needs it: the spec commands start without it
    import jsonschema.exceptions

    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(value))
    if error is not None:
        where = "".join(f"[{p!r}]" for p in error.absolute_path)
        raise ValueError(f"{where + ': ' if where else ''}{error.message}")


def _example(param: ir.Param) -> str:
    return f" (for example -p {param.name}={param.examples[0]})" if param.examples else ""


# The types a param may name (cyberian's `range`, a pipeline input's `type`), in any case.
TYPES = frozenset({"string", "str", "integer", "int", "float", "number", "boolean", "bool", "json", "file_path"})


def coerce(value: Any, type_name: str) -> Any:
    kind = type_name.lower()
    if kind in ("integer", "int"):
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ValueError(f"{value!r} is not an integer")
        try:
            return int(value)
        except ValueError:
            raise ValueError(f"{value!r} is not an integer") from None
    if kind in ("float", "number"):
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{value!r} is not a number") from None
        return int(number) if kind == "number" and number.is_integer() else number
    if kind == "file_path":
        if not isinstance(value, str) or not os.path.isfile(value):
            raise ValueError(f"no file at {value!r}")
        return os.path.abspath(value)
    if kind in ("boolean", "bool"):
        if isinstance(value, bool):
            return value
        if str(value).lower() in ("true", "yes", "1", "false", "no", "0"):
            return str(value).lower() in ("true", "yes", "1")
        raise ValueError(f"{value!r} is not a boolean")
    if kind == "json" and isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not valid JSON ({exc.msg})") from None
    return value if not isinstance(value, (int, float)) or kind not in ("string", "str") else str(value)
