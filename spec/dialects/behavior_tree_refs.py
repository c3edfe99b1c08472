"""A behaviour tree's `$ref`s: the fragment files they name, read once each, with the positions
of what is in them, and the chain of references that leads to each, so a cycle is an error."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spec.errors import Problem, SpecError
from spec.yamlpos import PosDict, load_yaml

MAX_DEPTH = 32  # fragments nested deeper than this are a mistake, said before the stack is


@dataclass(frozen=True)
class Found:
    """A referenced node and the file it is in."""

    node: Any
    file: str


@dataclass
class Refs:
    root_file: str
    root: Any
    texts: dict[str, Any] = field(default_factory=dict)  # loaded documents by their path

    def __post_init__(self) -> None:
        self.texts[_key(self.root_file)] = self.root

    def follow(self, ref: Any, file: str, at: tuple[int, int], chain: tuple[str, ...]) -> tuple[Found, str]:
        """What `$ref: ref` in `file` names, and the name it gets in the chain of references
        (`file#pointer`); SpecError if it cannot be read or it refers back to itself."""
        if not isinstance(ref, str) or not ref.strip():
            raise self._error(file, at, "$ref must be a file path such as ./fragments/checks.yaml", "")
        if "://" in ref:
            hint = "download it next to the tree and refer to it by a relative path: nothing is fetched"
            raise self._error(file, at, f"$ref to a URL is not followed: {ref}", hint)
        target_part, _, pointer = ref.partition("#")
        target = str((Path(file).parent / target_part).resolve()) if target_part else _key(file)
        name = f"{target}#{pointer}"
        if name in chain:
            cycle = " -> ".join(_short(c) for c in (*chain[chain.index(name) :], name))
            raise self._error(
                file, at, f"cyclic $ref: {cycle}", "a fragment may not refer back to a tree it is part of"
            )
        if len(chain) >= MAX_DEPTH:
            raise self._error(file, at, f"$ref nested more than {MAX_DEPTH} deep", "flatten the fragments")
        document = self._document(target, ref, file, at)
        return Found(self._pointed(document, pointer, ref, file, at), target), name

    def _document(self, target: str, ref: str, file: str, at: tuple[int, int]) -> Any:
        if target not in self.texts:
            try:
                text = Path(target).read_text(encoding="utf-8-sig")
            except OSError as exc:
                hint = "the path is relative to the file that holds the $ref"
                raise self._error(file, at, f"$ref {ref}: cannot read {target}: {exc.strerror}", hint) from None
            self.texts[target] = load_yaml(text, target)
        return self.texts[target]

    def _pointed(self, document: Any, pointer: str, ref: str, file: str, at: tuple[int, int]) -> Any:
        """The value a JSON pointer (`/tree/children/0`) names in the document."""
        value = document
        for part in filter(None, pointer.split("/")):
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(value, dict) and part in value:
                value = value[part]
            elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
                value = value[int(part)]
            else:
                raise self._error(file, at, f"$ref {ref}: nothing at #{pointer}", "check the JSON pointer after '#'")
        return value

    def _error(self, file: str, at: tuple[int, int], message: str, hint: str) -> SpecError:
        return SpecError([Problem(file, at[0], at[1], message, hint)])


def is_ref(value: Any) -> bool:
    return isinstance(value, PosDict) and "$ref" in value


def _key(file: str) -> str:
    return str(Path(file).resolve())


def _short(name: str) -> str:
    path, _, pointer = name.partition("#")
    return Path(path).name + (f"#{pointer}" if pointer else "")
