"""The shape of a node kind's runtime, which each module under `workflows.nodes` declares."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from agentrun.lang import ir

if TYPE_CHECKING:
    from agentrun.workflows.runtime import Runtime
    from agentrun.workflows.scope import Scope

NodeT = TypeVar("NodeT", bound=ir.NodeBase)


@dataclass(frozen=True)
class Handler(Generic[NodeT]):
    """How nodes of one kind run: `execute` takes a node of the class `kind` (the type checker holds
    the two together, so a handler cannot be registered for a kind it was not written for)."""

    kind: type[NodeT]
    execute: Callable[[Runtime, NodeT, Scope], Awaitable[Any]]
    # Does work a resumed run does not repeat (an agent prompt, a provider call): skipped before
    # --resume-from, and marked by what it reads itself; any other node's taint comes from the
    # nodes it ran.
    work: bool = False
    # Applies the node's timeout itself (an agent task or a provider call gives it to its activity,
    # a question is its gate's timeout, a parallel step bounds its wait policy) instead of being
    # cancelled as a whole when the timeout passes.
    own_timeout: bool = False
