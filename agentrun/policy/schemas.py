"""Whether a bound host tool takes the arguments a spec declares for it (cycgraph's
`manifest.requires.tools[].input_schema`): every argument the declaration requires is one the tool
has, of the same JSON type, and every argument the tool requires is one the declaration names.
Pure text, so the workflow and `start` both check it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast


def mismatch(declared: Mapping[str, Any], bound: Mapping[str, Any]) -> str:
    """ "" when the bound tool's schema takes what `declared` says (or nothing is declared), else why not."""
    if not declared:
        return ""
    wanted, has = _properties(declared), _properties(bound)
    wrong: list[str] = []
    for name in _required(declared):
        if name not in has:
            wrong.append(f"it has no argument '{name}'")
        elif _type(wanted.get(name)) and _type(has[name]) and _type(wanted.get(name)) != _type(has[name]):
            wrong.append(f"its argument '{name}' is {_type(has[name])}, not {_type(wanted.get(name))}")
    wrong += [
        f"it requires '{name}', which the spec does not declare" for name in _required(bound) if name not in wanted
    ]
    return "; ".join(wrong)


def _properties(schema: Mapping[str, Any]) -> dict[str, Any]:
    found: Any = schema.get("properties")
    return cast(dict[str, Any], found) if isinstance(found, dict) else {}


def _required(schema: Mapping[str, Any]) -> list[str]:
    found: Any = schema.get("required")
    return [str(name) for name in cast(list[Any], found)] if isinstance(found, list) else []


def _type(schema: Any) -> str:
    """A property's JSON type ("integer", or "integer/null" for a list of them); "" when it says none."""
    found: Any = cast(dict[str, Any], schema).get("type", "") if isinstance(schema, dict) else ""
    if isinstance(found, list):
        return "/".join(str(t) for t in cast(list[Any], found))
    return str(found)
