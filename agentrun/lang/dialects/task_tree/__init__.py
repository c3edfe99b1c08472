"""The recursive task tree (cyberian): depth-first tasks with instructions, loops, checks, providers.

Every key of the real format is accepted; unknown keys are errors. Extensions: `agent` (which agent
id a task talks to), `timeout`, `max_iterations`, root `completion: strict | lenient`, and the keys
of humans in the loop: `human`, `approval`, `compensate`, `budget`, root `goal`, `constraints`, `prices`,
and `store_as` (the run memory key a task writes its output to; any template reads it by name).

A task's id is its path of names (`A.B`), and its own work (instructions, provider call or a
question alone) carries it. A task without subtasks compiles to that work; one with subtasks to a
sequence of its work and its subtasks, named `A.B.*` (the task and everything under it), or `A.B`
when the task has no work of its own.

The models and helpers for gates, compensations and budgets are in `common_keys.py`, shared with
the pipeline dialect.
"""

from __future__ import annotations

from agentrun.lang import ir
from agentrun.lang.yamlpos import mapping_or_none

NAME = "task-tree"
MARKS = "a task tree has 'subtasks:' or 'instructions:' at the top level"
TRAITS = ir.Traits(stores_with="a task's `store_as: NAME`")
EXAMPLES = ("quickstart.yaml", "release.yaml")  # under examples/: what the README runs


def detect(path: str, text: str) -> bool:
    """A YAML mapping with a task's keys at the top (and not a pipeline's `workflow:`)."""
    data = mapping_or_none(text)
    keys = {"subtasks", "instructions", "provider_call", "human"}
    return data is not None and bool(keys & set(data)) and "workflow" not in data
