"""A spec file's text as the loader reads it: a size limit and the encodings people save in.

Shared by the loader and by dialects that read more files than the one given (a behaviour tree's
`$ref` fragments), so every file a spec is made of is read under the same limits. Every file a load
reads (these, and a policy, an agent.toml, a prompt's or a skill's file) is noted, so the plan can
name the files it was made from: a run's agents may read them, never change them.
"""

from __future__ import annotations

import codecs
import contextlib
import os
from collections.abc import Iterator
from contextvars import ContextVar

from agentrun.lang import roots
from agentrun.lang.errors import Problem, SpecError

MAX_SPEC_BYTES = 512 * 1024  # the largest example is under 10 KB


_read: ContextVar[list[str] | None] = ContextVar("agentrun_files_read", default=None)


@contextlib.contextmanager
def noting() -> Iterator[list[str]]:
    """The files read in this block (`note`), each once, by its real path; a block inside another
    adds its files to the outer one's too."""
    outer = _read.get()
    found: list[str] = []
    token = _read.set(found)
    try:
        yield found
    finally:
        _read.reset(token)
        if outer is not None:
            outer.extend(p for p in found if p not in outer)


def note(path: str) -> None:
    """That the load in progress read `path` (nothing outside `noting`)."""
    found = _read.get()
    if found is not None:
        real = os.path.realpath(path)
        if real not in found:
            found.append(real)


def read_text(path: str, hint: str = "check the path; it is relative to the current folder") -> str:
    """The text of the file at `path`; SpecError if it cannot be read, is too large or is not text,
    or lies outside the folders this load may read (agentrun.lang.roots)."""
    note(path)
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
