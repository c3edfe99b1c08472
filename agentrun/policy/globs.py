"""A glob as a regular expression, for the two callers that match paths by glob: the `glob` tool, one
path component at a time with `{a,b}` alternatives, and the policy's allow/deny globs
(`policy.paths.match_path`), a whole path as Go's filepath.Match reads it, without braces."""

from __future__ import annotations

import re


def glob_regex(pattern: str, braces: bool = False) -> str:
    """`pattern` as a regex: `*` and `?` never match a `/`; `[..]` is a class (`!` or `^` first
    negates it, a `]` first is one of its characters, a `\\` in it is itself); an unclosed `[` is
    itself; with `braces`, `{a,b}` is either alternative. Anything else matches itself."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[" and (end := _class_end(pattern, i)) != -1:
            body = pattern[i + 1 : end]
            if body[0] in "!^":
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end
        elif braces and c == "{" and (end := pattern.find("}", i)) != -1:
            alternatives = pattern[i + 1 : end].split(",")
            out.append("(?:" + "|".join(glob_regex(alt, braces) for alt in alternatives) + ")")
            i = end
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def _class_end(pattern: str, start: int) -> int:
    """The `]` that closes the class opened at `start`, or -1: the class's first character (after a
    negation) is never its end, so `[]]` and `[!]]` are classes of `]`, as in the shell and Go."""
    first = start + 1
    if pattern[first : first + 1] in ("!", "^"):
        first += 1
    return pattern.find("]", first + 1)
