"""An Agentfile's text as a template: its references (`$name`, and `{name}` or `{{name}}` in the
draft form) become Jinja names, and anything else that Jinja would read is kept as plain text.

What a reference may name is given by the caller: the inputs and the outputs of what ran before.
Text read FROM a file is a prompt the real system never checks: a `$name` there that names nothing
stays as written and is a warning (example 40's prompt files show Agentfiles with their own inputs).
A `{{name}}` that names nothing is text.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

from agentrun.lang.dialects.agentfile.lex import Text
from agentrun.lang.errors import Problem, did_you_mean

_DOLLAR = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*(?:-[A-Za-z0-9_]+)*)")
_BRACED = re.compile(r"(?<!\{)\{([A-Za-z_][A-Za-z0-9_-]*)\}(?!\})")
_DOUBLE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_JINJA = re.compile(r"\{[{%#]")
_LEFT_AS_WRITTEN = "the prompt keeps it as written, as the Agentfile's real system does; declare it to fill it in"


def literal(text: str) -> str:
    """Text Jinja renders as itself: its `{{`, `{%` and `{#` are written as strings."""
    return _JINJA.sub(lambda m: "{{ '" + m.group() + "' }}", text)


def template(
    text: Text,
    known: Mapping[str, str],
    later: Mapping[str, str],
    braces: bool,
    problems: list[Problem],
    warnings: list[Problem] | None = None,
) -> str:
    """The Jinja template for `text`. `known` maps each name a reference may take to what gives it,
    `later` the names only steps that run after this one give; `braces` reads `{name}` and
    `{{name}}` as references too. A reference to anything else is a problem, or, given `warnings`
    (text read FROM a file), a warning and text as written."""
    out, last = [], 0
    for match in _references(text.value, braces):
        name = _known_prefix(match.group(1), known)
        if name is None and match.group().startswith("{{"):
            continue
        if name is None:
            undefined = _undefined(text, match, known, later)
            if warnings is None:
                problems.append(undefined)
            else:
                warnings.append(dataclasses.replace(undefined, severity="warning", hint=_LEFT_AS_WRITTEN))
            continue
        line, col = text.at(match.start())
        if "-" in name:
            hint = f"rename it with '_' ({name.replace('-', '_')}): a prompt cannot read a name with '-'"
            problems.append(Problem(text.file, line, col, f"reference {match.group()} names '{name}'", hint))
            continue
        end = match.start(1) + len(name)
        if match.group().startswith("{"):
            end = match.end()
        before = text.value[last : match.start()]
        out.append(_before_reference(before) + "{{ " + name + " }}")
        last = end
    out.append(literal(text.value[last:]))
    return "".join(out)


def _references(value: str, braces: bool) -> list[re.Match[str]]:
    found = list(_DOLLAR.finditer(value))
    if braces:
        found += list(_BRACED.finditer(value)) + list(_DOUBLE.finditer(value))
    return sorted(found, key=lambda m: m.start())


def _known_prefix(name: str, known: Mapping[str, str]) -> str | None:
    """The longest name known that `name` starts with at a '-': in "$version-rc", `version`."""
    parts = name.split("-")
    for cut in range(len(parts), 0, -1):
        candidate = "-".join(parts[:cut])
        if candidate in known:
            return candidate
    return None


def _before_reference(text: str) -> str:
    # A '{' right before "{{ name }}" would make Jinja read "{{{", so it is written as a string.
    escaped = literal(text)
    return escaped[:-1] + "{{ '{' }}" if escaped.endswith("{") else escaped


def _undefined(text: Text, match: re.Match[str], known: Mapping[str, str], later: Mapping[str, str]) -> Problem:
    line, col = text.at(match.start())
    name = _known_prefix(match.group(1), later) or match.group(1)
    if name in later:
        hint = f"'{name}' is an output of {later[name]}, which runs after this one"
    else:
        hint = did_you_mean(name, known) or f"declare it (INPUT {name}), or give an earlier goal the output: -> {name}"
    return Problem(text.file, line, col, f"undefined reference {match.group()}", hint)
