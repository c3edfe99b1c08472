"""One module per spec language, each a dialect the loader asks in order.

A dialect module has `NAME`, `detect(path, text) -> bool` (is this file in my language?) and
`compile(path, text, params) -> Plan` (SpecError with file:line problems if it is not valid);
`params` names the params given on the command line. Add a new language's module to DIALECTS.
"""

from __future__ import annotations

from typing import Protocol

from agentrun.lang import ir
from agentrun.lang.dialects import agentfile, behavior_tree, cycgraph, pipeline, task_tree


class Dialect(Protocol):
    @property
    def NAME(self) -> str: ...  # a module constant; read-only here so a Literal satisfies it

    def detect(self, path: str, text: str) -> bool: ...

    def compile(self, path: str, text: str, params: set[str]) -> ir.Plan: ...


# Asked in this order; the first that claims a file compiles it.
DIALECTS: tuple[Dialect, ...] = (agentfile, task_tree, pipeline, behavior_tree, cycgraph)
