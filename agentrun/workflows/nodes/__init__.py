"""Each node kind's runtime, one module per kind, found here by the kind's name.

A handler runs one node once; the interpreter around it applies what every node shares: its gate,
budget, retries, failure policy, timeout, the values it keeps and its compensation.
"""

from __future__ import annotations

from typing import Any

from agentrun.workflows.nodes import (
    evaluate,
    graph,
    human,
    loop,
    map,
    parallel,
    provider,
    selector,
    sequence,
    subflow,
    supervisor,
    switch,
    task,
    verifier,
    voting,
)
from agentrun.workflows.nodes.base import Handler

_MODULES = (
    task,
    provider,
    human,
    evaluate,
    sequence,
    parallel,
    selector,
    switch,
    loop,
    map,
    graph,
    supervisor,
    verifier,
    voting,
    subflow,
)
HANDLERS: dict[str, Handler[Any]] = {m.HANDLER.kind.model_fields["kind"].default: m.HANDLER for m in _MODULES}
RUNNABLE_KINDS = frozenset(HANDLERS)
