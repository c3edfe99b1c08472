"""What a node kind implements to appear in `inspect`, `dry-run` and the graph: a `View`."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from agentrun.explain.views.words import agent_name, policy_text
from agentrun.lang import ir

if TYPE_CHECKING:
    from agentrun.explain.blocks import Block
    from agentrun.explain.describe import Describer, DryRun
    from agentrun.explain.graph import Drawer

N = TypeVar("N", bound=ir.Node)
Agents = dict[str, ir.AgentInfo]
Scope = dict[str, Any]  # template values a dry run hands down to the steps under one (item, input, …)


@dataclass(frozen=True)
class Entry:
    """A step's place in a listing."""

    tag: str  # its number: 2, 2a, 2a1
    head: str  # its first line up to where the view goes on: indent, number, lead, numbered step's id
    indent: str  # of the lines under the first, and of the steps under it


class View(ABC, Generic[N]):
    """How one node kind reads in `inspect` and `dry-run` and how the graph draws it.

    The walkers (`client.explain`, `client.graph`) number steps, indent them and add the notes
    every kind has (gate, undo, budget); a view writes what is particular to its kind, and asks
    the walker for the steps under it.
    """

    # Drawn as a single box, which then holds the node's marks (gate, undo, budget); the graph
    # writes the marks of other kinds as a note in front of their figure.
    boxed = False

    @abstractmethod
    def describe(self, node: N, at: Entry, gets: str, inspect: Describer) -> list[str]:
        """`inspect`'s lines, the first starting with `at.head`; `gets` says in words what the
        enclosing step hands the node."""

    @abstractmethod
    def dry_run(self, node: N, at: Entry, scope: Scope, dry: DryRun) -> list[str]:
        """`dry-run`'s lines, the first starting with `at.head`; `scope` holds the template values
        the enclosing steps add for it."""

    @abstractmethod
    def draw(self, node: N, tag: str, follows: bool, drawer: Drawer) -> Block:
        """The node's figure in the graph; `follows` is true when a later step joins on after it."""

    def who(self, node: N, agents: Agents) -> str:
        """How another step names this one (a loop's checker, a map's body, a fallback)."""
        return f"{agent_name(node, agents)} ({node.id})"

    def box_text(self, node: N, agents: Agents) -> str:
        """What a box standing for this node says after its number."""
        return agent_name(node, agents)

    def details(self, node: N, who: Callable[[ir.Node], str]) -> list[str]:
        """Lines under the node's first line in `inspect`: retries, failure policy and timeout."""
        policy = policy_text(node, who)
        return [policy] if policy else []


class Shown(str):
    """A value a dry run does not have, such as a step's output. It is its label as text, so it
    renders and serializes as one, and any field read from it is a label too (`<output of x>.score`):
    templates fill in without an agent having run."""

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("_"):
            return super().__getattribute__(name)
        return Shown(f"{self}.{name}")

    def __getitem__(self, key: Any) -> Shown:
        return Shown(f"{self}[{key}]" if isinstance(key, int) else f"{self}.{key}")

    def __iter__(self):
        return iter([Shown(f"{self}[0]")])
