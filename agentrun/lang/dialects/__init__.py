"""One package per spec language, each a dialect the loader asks in order.

A dialect package has `NAME`, `MARKS` (what marks a file as its own, for the hint when no language
claims a file), `TRAITS` (what its plans are like, for the client and the workflows), `EXAMPLES`
(globs under examples/ of the spec files it ships) and `detect(path, text) -> bool` (is this file in
my language?). Its `compiler` module has `compile(path, text, params) -> Plan` (SpecError with
file:line problems if it is not valid); `params` names the params given on the command line.
`compile` below imports that module only for the language that claimed the file, so asking every
language to detect a file loads none of their compilers. A new language is its package and one
entry in DIALECTS; `tests/test_dialects.py` says what it still lacks.
"""

from __future__ import annotations

import importlib
from typing import Protocol

from agentrun.lang import ir
from agentrun.lang.dialects import agentfile, behavior_tree, cycgraph, pipeline, task_tree


class Dialect(Protocol):
    # Module constants; read-only properties here so a Literal or a frozen model satisfies them.
    @property
    def NAME(self) -> str: ...

    @property
    def MARKS(self) -> str: ...

    @property
    def TRAITS(self) -> ir.Traits: ...

    @property
    def EXAMPLES(self) -> tuple[str, ...]: ...  # globs under examples/ of the files it ships

    @property
    def __name__(self) -> str: ...

    def detect(self, path: str, text: str) -> bool: ...


# Asked in this order; the first that claims a file compiles it.
DIALECTS: tuple[Dialect, ...] = (agentfile, task_tree, pipeline, behavior_tree, cycgraph)


def marks() -> str:
    """What marks a file as each language's, for the hint when none claims it."""
    return "; ".join(d.MARKS for d in DIALECTS)


def compile(dialect: Dialect, path: str, text: str, params: set[str]) -> ir.Plan:
    """The Plan of a file `dialect` claimed, by its compiler module, loaded now: every language is
    asked to detect, one compiles."""
    return importlib.import_module(f"{dialect.__name__}.compiler").compile(path, text, params)
