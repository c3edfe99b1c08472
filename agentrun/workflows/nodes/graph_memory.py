"""What a graph node sees of the run's memory, and where its value goes in it.

Most nodes write their value under their write key, or a JSON object key by key among their
write_keys. The nodes that run other work write what the state-graph reference says they write: a map its results, errors
and their counts (`<id>_results`, …), a vote its outcome under its vote_key with the winner and
the votes beside it (`<id>_consensus`, `<id>_votes`), a subgraph the keys its output_mapping names,
an approval `human_decision` (`approved` or `rejected`) and the person's comment as `human_response`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentrun.ids import GateId
from agentrun.lang import ir
from agentrun.workflows import taint
from agentrun.workflows.failures import TaskFailed
from agentrun.workflows.local_tools import saved_updates
from agentrun.workflows.nodes.loop import as_data

# Params every graph has that are the run's own, not memory keys (a state graph's goal and constraints);
# a subgraph shares them with its parent.
RUN_PARAMS = frozenset({"goal", "constraints"})

if TYPE_CHECKING:
    from agentrun.workflows.runtime import Runtime
    from agentrun.workflows.scope import Scope


def visible(memory: dict[str, Any], access: ir.Access) -> dict[str, Any]:
    """The memory a node sees: its read keys, or every key not reserved (`_…`) for `*`."""
    if "*" in access.read_keys:
        return {k: v for k, v in memory.items() if not k.startswith("_")}
    return {k: memory[k] for k in access.read_keys if k in memory}


def write(engine: Runtime, graph: ir.Graph, node: ir.Node, value: Any, scope: Scope) -> None:
    """Put a node's value in memory: a JSON object from a node with several write keys key by
    key (a key outside them fails the node), anything else under its write key."""
    key = str(engine.key_of(node, scope))
    access = graph.access.get(node.id, ir.Access())
    if isinstance(node, ir.Map) and node.outcomes:
        _put(engine, key, _map_outcome(node, graph.access.get(node.body.id, ir.Access()), value))
        return
    if isinstance(node, ir.Voting):
        votes = {access.write_key or node.vote_key: value}
        _put(engine, key, {**votes, f"{node.id}_consensus": value["winner"], f"{node.id}_votes": value["votes"]})
        return
    if isinstance(node, ir.Subflow):
        _put(engine, key, value)
        return
    if isinstance(node, ir.Human) and node.approval:
        _put(engine, key, _decision(engine, GateId(key), value))  # an approval node's gate is keyed by its run
        return
    saved = engine.conversation.saved.pop(key, None) if isinstance(node, ir.Task) else None
    if saved:
        # Pairs the agent saved with save_to_memory stand in for its reply, as in cycgraph.
        _put(engine, key, saved_updates(saved, access.write_keys or [k for k in [access.write_key] if k]))
        return
    value = as_data(value) if isinstance(node, ir.Task) else value  # a reply that is JSON is kept as data
    if len(access.write_keys) > 1 and isinstance(value, dict):
        outside = sorted(set(value) - set(access.write_keys))
        if outside:
            message = f"wrote {', '.join(outside)}, outside its write_keys ({', '.join(access.write_keys)})"
            engine.state.mark_row(key, "failed", message)
            raise TaskFailed(key, message)
        _put(engine, key, value)
        return
    if access.write_key is None or isinstance(node, ir.Supervisor):
        return
    _put(engine, key, {access.write_key: value})
    if isinstance(node, ir.Verifier) and isinstance(value, dict):
        engine.state.remember(f"{access.write_key}_passed", value.get("passed") is True)


def _decision(engine: Runtime, key: GateId, value: Any) -> dict[str, Any]:
    """What cycgraph's resume writes: the decision, and what the person said with it if anything."""
    decided = {"human_decision": "rejected" if value == ir.REJECT else "approved"}
    gate = engine.state.gates.get(key)
    said = gate.answer.comment if gate is not None and gate.answer is not None else ""
    return {**decided, "human_response": said} if said else decided


def _put(engine: Runtime, key: str, values: dict[str, Any]) -> None:
    """Write each of `values` to memory; each carries the mark of the node run `key` made it."""
    for name, item in values.items():
        engine.state.remember(name, item)
        taint.copy_to(name, key, engine.state)


def _map_outcome(node: ir.Map, worker: ir.Access, outcome: dict[str, Any]) -> dict[str, Any]:
    """A map's value as the state-graph reference writes it: each item's result as the updates its worker made."""
    results = [
        {"index": r["index"], "node_id": node.body.id, "updates": _updates(node.body, worker, r["value"])}
        for r in outcome["results"]
    ]
    errors = [{"index": e["index"], "node_id": node.body.id, "error": e["error"]} for e in outcome["errors"]]
    return {
        f"{node.id}_results": results,
        f"{node.id}_errors": errors,
        f"{node.id}_count": len(results),
        f"{node.id}_error_count": len(errors),
    }


def _updates(body: ir.Node, access: ir.Access, value: Any) -> dict[str, Any]:
    value = as_data(value) if isinstance(body, ir.Task) else value
    if len(access.write_keys) > 1 and isinstance(value, dict):
        return {k: v for k, v in value.items() if k in access.write_keys}
    return {access.write_key or body.id: value}
