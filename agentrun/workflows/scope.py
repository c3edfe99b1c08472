"""What a node runs with: its run key, the values its templates see, and the engine's bookkeeping,
each in its own field."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from agentrun.lang.scope import BUILTINS


@dataclass(frozen=True)
class RunKey:
    """Which run of a node this is: its id and, inside maps, the element indexes (outermost first).

    People read it as the node's id with the indexes: `score[3]`. Status rows, taint marks and
    failures are recorded under that text; nothing parses it back.
    """

    node: str
    elements: tuple[int, ...] = ()
    text: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Read a dozen times a step (rows, journal, taint, spans): written once.
        object.__setattr__(self, "text", self.node + "".join(f"[{i}]" for i in self.elements))

    def element(self, index: int) -> RunKey:
        return RunKey(self.node, (*self.elements, index))

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Scope:
    """The node being run and what it runs with.

    `values` are the built-in names the node's templates see besides the run's own (input, item,
    index, feedback, iteration, output); `budgets` are the budgeted nodes it runs under, innermost
    last; `derived_from` the run keys its `input` or `item` came from, for taint.
    """

    key: RunKey | None = None
    values: Mapping[str, Any] = field(default_factory=dict)
    budgets: tuple[str, ...] = ()
    derived_from: tuple[str, ...] = ()
    path: str = ""  # where in the walk: the parents' run keys and loop rounds (workflows.journal)

    @property
    def elements(self) -> tuple[int, ...]:
        return self.key.elements if self.key else ()

    def at(self, key: RunKey) -> Scope:
        return replace(self, key=key, path=self.path_of(key))

    def path_of(self, key: RunKey) -> str:
        return f"{self.path}/{key}"

    def in_round(self, iteration: int) -> Scope:
        """The scope of a loop's body and validator in round `iteration`."""
        return replace(self, path=f"{self.path}@{iteration}")

    def with_values(self, **values: Any) -> Scope:
        unknown = set(values) - set(BUILTINS)
        assert not unknown, f"not built-in template names: {unknown}"  # spec.scope declares them
        return replace(self, values={**self.values, **values})

    def under_budget(self, node_id: str) -> Scope:
        return replace(self, budgets=(*self.budgets, node_id))

    def derived(self, keys: list[str] | tuple[str, ...]) -> Scope:
        return replace(self, derived_from=tuple(keys))
