"""Which nodes a walk along a graph's edges reaches: for the graph checks and their drawings."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable


def reachable(start: str, successors: Callable[[str], Iterable[str]]) -> list[str]:
    """`start` and every node reached from it, breadth first, each once."""
    order, found, queue = [start], {start}, deque([start])
    while queue:
        for nxt in successors(queue.popleft()):
            if nxt not in found:
                found.add(nxt)
                order.append(nxt)
                queue.append(nxt)
    return order
