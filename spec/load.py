"""Read a spec file, find its language, compile it to a Plan."""

from __future__ import annotations

import codecs
from collections.abc import Iterable

from spec import ir
from spec.dialects import DIALECTS
from spec.errors import Problem, SpecError
from spec.yamlpos import load_mapping

MAX_SPEC_BYTES = 512 * 1024  # the largest example is under 10 KB


def load(path: str, given_params: Iterable[str] = ()) -> ir.Plan:
    """The Plan for the spec at `path`; SpecError with file:line problems if it is not valid."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_SPEC_BYTES + 1)
    except OSError as exc:
        hint = "check the path; it is relative to the current folder"
        raise SpecError([Problem(path, 0, 0, f"cannot read spec: {exc.strerror}", hint)]) from None
    text = decode(path, raw)
    for dialect in DIALECTS:
        if dialect.detect(path, text):
            return dialect.compile(path, text, set(given_params))
    raise SpecError([_unknown_language(path, text)])


def decode(path: str, raw: bytes) -> str:
    """A spec's text: UTF-8 (a byte-order mark allowed), or UTF-16 with its mark; anything else is
    one error at the first byte that cannot be read."""
    if len(raw) > MAX_SPEC_BYTES:
        message = f"the spec is larger than {MAX_SPEC_BYTES // 1024} KB"
        raise SpecError([Problem(path, 0, 0, message, "a spec is a small file; pass large data with -p KEY=@FILE")])
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return raw.decode("utf-16")
        except UnicodeDecodeError:
            pass  # a UTF-16 mark on text that is not UTF-16: said as the UTF-8 error below
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        message = f"the spec is not UTF-8 text: byte 0x{raw[exc.start]:02x} cannot be read"
        hint = "save the file as UTF-8 (for example: iconv -f latin1 -t utf-8 old.yaml > spec.yaml)"
        raise SpecError([Problem(path, line, column, message, hint)]) from None


def _unknown_language(path: str, text: str) -> Problem:
    """Why no dialect took the file: what is wrong with it as YAML, else that its keys fit none."""
    load_mapping(text, path)  # a YAML syntax error or a top level that is no mapping, said as such
    return Problem(
        path,
        1,
        1,
        "cannot tell which spec language this file is in",
        "a task tree has 'subtasks:' or 'instructions:' at the top level; "
        "a pipeline has 'workflow:' with agents: and steps:",
    )
