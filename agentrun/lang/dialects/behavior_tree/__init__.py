"""Behaviour trees driven step by step (behaviors-sh, and its predecessor abtree), in YAML or JSON.

Two layouts are read. In behaviors-sh the file's root is a node, with `state: {var, const}` on it;
in abtree a wrapper `{$schema, name, version, description, state: {local, global}, tree: <node>}`
holds it (`local`/`global` are `var`/`const`, and either pair is accepted in either layout). `var`
seeds the run's memory ($VAR, $LOCAL); `const` is read-only ($CONST, $GLOBAL). A node is an action
with steps, a sequence, selector or parallel with children, or a `$ref` to one in another file
(`refs`). The nodes compile in `nodes`, their keys are in `keys`.

Engine extensions: on any node `approval`, `budget` and `compensate: "text"` (an instruct step asked
when the run rolls back); at the top `budget` (the run's) and `running: {wait, max_wait, max_asks}`,
how a step the agent says is still running is asked again.
"""

from __future__ import annotations

from agentrun.lang import ir
from agentrun.lang.dialects.behavior_tree.refs import REF
from agentrun.lang.yamlpos import mapping_or_none, yaml_text

NAME = "behavior_tree"
MARKS = "a behaviour tree has 'tree:' (with name: and version:) or is a node: 'type: sequence' with children:"
TRAITS = ir.Traits(tree=True, blackboard=True)
EXAMPLES = (  # under examples/ (fragments/ holds $ref targets; *.replies.yaml are recorded replies)
    "trees/deploy.yaml",
    "trees/ship.yaml",
    "trees/release.json",
)

# Top-level keys of the other YAML dialects (task trees, pipelines): a file with one is theirs.
OTHERS = {"workflow", "subtasks", "instructions", "provider_call", "human"}
NODE_KEYS = {"type", REF, "children", "steps"}


def detect(path: str, text: str) -> bool:
    """A mapping with a node's keys or the wrapper's `tree:` (or its name and version), and none
    of another language's top-level keys."""
    data = mapping_or_none(yaml_text(path, text))
    if data is None or OTHERS & set(data):
        return False
    return bool((NODE_KEYS | {"tree"}) & set(data)) or {"name", "version"} <= set(data)
