"""A spec file's text as the loader reads it: a size limit and the encodings people save in.

Shared by the loader and by dialects that read more files than the one given (a behaviour tree's
`$ref` fragments), so every file a spec is made of is read under the same limits.
"""

from __future__ import annotations

import codecs

from agentrun.lang import roots
from agentrun.lang.errors import Problem, SpecError

MAX_SPEC_BYTES = 512 * 1024  # the largest example is under 10 KB


def read_text(path: str, hint: str = "check the path; it is relative to the current folder") -> str:
    """The text of the file at `path`; SpecError if it cannot be read, is too large or is not text,
    or lies outside the folders this load may read (agentrun.lang.roots)."""
    if roots.outside(path):
        raise SpecError([Problem(path, 0, 0, "this file is outside the folders this server reads", roots.HINT)])
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_SPEC_BYTES + 1)
    except OSError as exc:
        raise SpecError([Problem(path, 0, 0, f"cannot read spec: {exc.strerror}", hint)]) from None
    return decode(path, raw)


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
