"""One package per spec language, each a dialect the loader asks in order.

A dialect package has `NAME`, `detect(path, text) -> bool` (is this file in my language?) and
`compile(path, text, params) -> Plan` (SpecError with file:line problems if it is not valid);
`params` names the params given on the command line; `FACTS`, the `ir.Facts` every plan it
compiles carries (what the client and the workflows need to know of it); `MARKS`, what marks a
file as its own (the loader's hint when no dialect claims a file); and `EXAMPLES`, its shipped
examples. Add a new language's package to DIALECTS; tests/test_dialects.py says what is missing.
"""

from __future__ import annotations

from typing import Protocol

from agentrun.lang import ir
from agentrun.lang.dialects import agentfile, behavior_tree, cycgraph, pipeline, task_tree


class Dialect(Protocol):
    @property
    def NAME(self) -> str: ...  # a module constant; read-only here so a Literal satisfies it

    @property
    def FACTS(self) -> ir.Facts: ...

    @property
    def MARKS(self) -> str: ...  # what marks a file as this language's, for the hint when none claims it

    @property
    def EXAMPLES(self) -> tuple[str, ...]: ...

    def detect(self, path: str, text: str) -> bool: ...

    def compile(self, path: str, text: str, params: set[str]) -> ir.Plan: ...


# Asked in this order; the first that claims a file compiles it.
DIALECTS: tuple[Dialect, ...] = (agentfile, task_tree, pipeline, behavior_tree, cycgraph)
