"""A behaviour tree's files and its `$ref`s, followed when the tree is loaded.

A ref is `file.yaml`, `file.yaml#/json/pointer` or `#/pointer` into the same file, relative to the
file holding it. A ref to a URL is refused (nothing is fetched). Every file is read once, under the
spec loader's limits, and its problems point into it. A ref leading back into a node the walk is
inside is a cycle: one error naming the chain, never a loop.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from agentrun.lang import roots
from agentrun.lang.errors import Problem, SpecError, did_you_mean
from agentrun.lang.source import read_text
from agentrun.lang.yamlpos import PosDict, load_yaml, position, yaml_text

REF = "$ref"
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:(//|[^\\/])")  # http://…, file://…, urn:…; not C:\ or C:/
MAX_HOPS = 100  # refs to refs, one after another
# What could not be read or pointed at (said where it was met): an empty file is None, and a value.
_UNREAD = object()


def parse(path: str, text: str) -> Any:
    """A tree file's content, YAML or JSON, with positions; SpecError for a syntax error."""
    return load_yaml(yaml_text(path, text), path)


def is_ref(value: Any) -> bool:
    return isinstance(value, dict) and REF in value


@dataclass(frozen=True)
class Located:
    """A value read from a tree file, and that file (as problems name it)."""

    value: Any
    file: str


@dataclass(frozen=True)
class Entered:
    """A node the walk is inside; `label` names where a ref (or the tree file) entered it."""

    ident: int
    label: str | None = None


Path = tuple[Entered, ...]


class Refs:
    def __init__(self, root_file: str, root_data: Any):
        self.folder = os.path.dirname(os.path.abspath(root_file))
        self.docs: dict[str, Any] = {os.path.abspath(root_file): root_data}
        self.failed: set[str] = set()  # files that did not read, said once
        self.problems: list[Problem] = []

    def label(self, file: str, pointer: str = "") -> str:
        """A place in the tree's files as the chain of a cycle names it."""
        name = os.path.relpath(os.path.abspath(file), self.folder)
        return name + (f"#{pointer}" if pointer else "")

    def follow(self, value: Any, file: str, inside: Path, label: str | None = None) -> tuple[Located, Path] | None:
        """The node `value` stands for (itself, or where its refs lead) and the walk's path with it
        entered; None, after saying why, when a ref cannot be followed or leads back into `inside`.
        `label` names the place of `value` itself when a cycle's chain starts there (the tree file)."""
        here = Located(value, file)
        for _ in range(MAX_HOPS):
            inside = inside + (Entered(id(here.value), label),)
            if not is_ref(here.value):
                return here, inside
            target = self._target(here)
            if target is None:
                return None
            there, label = target
            if any(entered.ident == id(there.value) for entered in inside):
                self._cycle(here, inside, there, label)
                return None
            here = there
        self._at(here, f"more than {MAX_HOPS} $refs lead one to another", "refer to the node itself")
        return None

    def _target(self, here: Located) -> tuple[Located, str] | None:
        ref = here.value[REF]
        if not isinstance(ref, str) or not ref.strip():
            self._at(here, "$ref must be the path of a tree file", "write $ref: fragments/checks.yaml")
            return None
        if _URL.match(ref):
            hint = "save the fragment beside the tree and refer to it by its relative path (fragments/checks.yaml)"
            self._at(here, f"$ref '{ref}' is a URL: refs to URLs are not fetched", hint)
            return None
        name, _, pointer = ref.strip().partition("#")
        file = os.path.normpath(os.path.join(os.path.dirname(here.file), unquote(name))) if name else here.file
        doc = self._document(here, ref, file)
        value = _UNREAD if doc is _UNREAD else self._point(here, ref, doc, unquote(pointer))
        return None if value is _UNREAD else (Located(value, file), self.label(file, pointer))

    def _document(self, here: Located, ref: str, file: str) -> Any:
        key = os.path.abspath(file)
        if key in self.docs:
            return self.docs[key]
        if key in self.failed:
            return _UNREAD
        if roots.outside(file):  # said before looking: nothing about a file out there is told
            self._at(here, f"$ref '{ref}' leads outside the folders this server reads", roots.HINT)
            self.failed.add(key)
            return _UNREAD
        if not os.path.isfile(file):
            self._missing(here, ref, file)
            return _UNREAD
        try:
            hint = f"a $ref path is relative to the folder of {os.path.basename(here.file)}"
            self.docs[key] = parse(file, read_text(file, hint))
        except SpecError as exc:
            self.problems += exc.problems
            self.failed.add(key)
            return _UNREAD
        return self.docs[key]

    def _missing(self, here: Located, ref: str, file: str) -> None:
        if os.path.isdir(file):
            self._at(here, f"$ref '{ref}' names a folder, not a tree file", "name the fragment file in it")
            return
        folder = os.path.dirname(file) or "."
        siblings = os.listdir(folder) if os.path.isdir(folder) else []
        close = did_you_mean(os.path.basename(file), siblings)
        relative = f"relative to the folder of {os.path.basename(here.file)}"
        hint = f"{close} The path is {relative}" if close else f"a $ref path is {relative}"
        self._at(here, f"$ref '{ref}': no such file {file}", hint)

    def _point(self, here: Located, ref: str, doc: Any, pointer: str) -> Any:
        """The value a JSON pointer (`/tree/children/0`) names in `doc`; _UNREAD after a problem."""
        if not pointer:
            return doc
        if not pointer.startswith("/"):
            self._at(here, f"$ref '{ref}': a pointer starts with '/'", f"write #/{pointer}")
            return _UNREAD
        value = doc
        for part in pointer[1:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(value, dict) and part in value:
                value = value[part]
            elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
                value = value[int(part)]
            else:
                known = [str(k) for k in value] if isinstance(value, dict) else []
                hint = did_you_mean(part, known) or (
                    "keys there: " + ", ".join(known) if known else "check the pointer against the file"
                )
                self._at(here, f"$ref '{ref}' points at nothing: there is no '{part}'", hint)
                return _UNREAD
        return value

    def _cycle(self, here: Located, inside: Path, there: Located, label: str) -> None:
        start = next(i for i, entered in enumerate(inside) if entered.ident == id(there.value))
        named = next((e.label for e in reversed(inside[: start + 1]) if e.label), None)
        chain = ([named] if named else []) + [e.label for e in inside[start + 1 :] if e.label] + [label]
        self._at(
            here,
            f"cyclic $ref '{here.value[REF]}': " + " → ".join(chain),
            "a tree cannot hold itself; put the repeated part in a fragment of its own and refer to it "
            "from each place that runs it",
        )

    def _at(self, here: Located, message: str, hint: str) -> None:
        line, column = position(here.value, (REF,)) if isinstance(here.value, PosDict) else (0, 0)
        self.problems.append(Problem(here.file, line, column, message, hint))
