"""Pure template rendering (Jinja2 in its sandbox). Used by the workflow, so no I/O and no clocks.

Only spec-authored text is ever a template. Values put in the context (params, agent replies)
are inserted as data and never rendered again.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from jinja2 import StrictUndefined, TemplateSyntaxError, meta
from jinja2.sandbox import SandboxedEnvironment

_ENV = SandboxedEnvironment(undefined=StrictUndefined, keep_trailing_newline=True, autoescape=False)


@lru_cache(maxsize=1024)
def _compile(source: str):
    return _ENV.from_string(source)


def render(source: str, context: dict[str, Any]) -> str:
    if "{" not in source:
        return source
    return _compile(source).render(context)


def render_value(value: Any, context: dict[str, Any]) -> Any:
    """Render strings inside a value, including strings inside lists and mappings."""
    if isinstance(value, str):
        return render(value, context)
    if isinstance(value, list):
        return [render_value(v, context) for v in value]
    if isinstance(value, dict):
        return {k: render_value(v, context) for k, v in value.items()}
    return value


def names_used(source: str) -> set[str]:
    """Top-level names a template reads. Raises TemplateSyntaxError on bad syntax."""
    return set(meta.find_undeclared_variables(_ENV.parse(source)))


__all__ = ["render", "render_value", "names_used", "TemplateSyntaxError"]
