"""Continuing a long run as new. A state graph's cycles may go round any number of times, but one
Temporal execution's history must stay a few thousand events long. So at a node boundary where the
history nears `RunInput.history_events` (or Temporal suggests it), the graph stops and the run
continues as new, handing the next execution its whole state; that one goes on at the same node.
The workflow id stays the same, so `status`, `watch` and `report` follow the chain to its end.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio import workflow

from spec import ir
from workflows.contract import Carried, CarriedUndo, GraphCursor, RunInput, RunState
from workflows.conversation import Conversation
from workflows.scope import RunKey

if TYPE_CHECKING:
    from workflows.interpreter import Interpreter
    from workflows.scope import Scope

PATCH = "graph-continue-as-new"
# Events one more node run may add (an agent's prompt with retries, a reminder, a validation):
# the run continues as new while this many are still left under the limit.
HEADROOM = 100


class ContinueAt(BaseException):
    """Ends this execution at a graph's node boundary. A BaseException, so that no node's failure
    handling (retries, fallbacks, `except Exception`) takes it for a failure on its way out."""

    def __init__(self, cursor: GraphCursor):
        super().__init__(f"continue as new at {cursor.node}")
        self.cursor = cursor


def resume_at(engine: Interpreter, node: ir.Graph, scope: Scope) -> GraphCursor | None:
    """Where the graph goes on when this execution continues an earlier one, else None."""
    carried = engine.inp.carried
    if carried is None or carried.cursor.graph != str(scope.key) or node is not engine.inp.plan.root:
        return None
    visited = engine.state.visited_nodes
    if visited and visited[-1] == str(scope.key):
        visited.pop()  # the graph was entered once, by the first execution
    return carried.cursor


def boundary(engine: Interpreter, node: ir.Graph, scope: Scope, current: str, runs: int) -> None:
    """Before the graph runs `current`: end this execution to go on in a fresh one, when its
    history is near its limit. Only a plan's own graph does, where nothing else is in flight."""
    if node is not engine.inp.plan.root or not _due(engine.inp):
        return
    raise ContinueAt(GraphCursor(graph=str(scope.key), node=current, runs=runs))


def _due(inp: RunInput) -> bool:
    info = workflow.info()
    near = info.get_current_history_length() + HEADROOM >= inp.history_events
    return (near or info.is_continue_as_new_suggested()) and workflow.patched(PATCH)


def carry(
    inp: RunInput,
    state: RunState,
    cursor: GraphCursor,
    conversation: Conversation,
    ran: dict[str, list[str]],
    rollback: bool,
) -> RunInput:
    """The input of the next execution: this one's, with everything it has done."""
    owners = {id(n.compensation): n for n in inp.plan.walk() if n.compensation is not None}
    undo = []
    for entry in state.compensation_stack:
        comp, key, output = entry.undo
        undo.append(CarriedUndo(node=owners[id(comp)].id, elements=list(key.elements), output=output))
    carried = Carried(
        state=state.model_copy(update={"executions": state.executions + 1}),
        cursor=cursor,
        turns=dict(conversation.turns),
        transcripts={agent: list(t) for agent, t in conversation.transcripts.items()},
        ran={key: list(dict.fromkeys(keys)) for key, keys in ran.items()},  # taint needs each once
        undo=undo,
        rollback=rollback,
    )
    return inp.model_copy(update={"carried": carried})


def restore(inp: RunInput, carried: Carried, conversation: Conversation) -> None:
    """Give the compensation stack its undo again and the conversation its counts and transcripts."""
    nodes = {n.id: n for n in inp.plan.walk()}
    for entry, undo in zip(carried.state.compensation_stack, carried.undo, strict=True):
        comp = nodes[undo.node].compensation
        assert comp is not None  # carry found it there
        entry.undo = (comp, RunKey(comp.id, tuple(undo.elements)), undo.output)
    conversation.turns = dict(carried.turns)
    conversation.transcripts = {agent: list(t) for agent, t in carried.transcripts.items()}
