"""The multi-agent pipeline YAML (sub-agent orchestrator): `workflow:` with inputs, agents and steps.

Every key of the seed's schema is accepted; unknown keys, and step keys the step's type would
ignore (agent: on a parallel step, wait: on a sequential one), are errors. Extensions: a step may set
`timeout` (for a parallel step it bounds the wait policy), a map step `concurrency` (default 20)
and `batch` (elements per child workflow of a long list, default 100), and a parallel branch `output_key`, as the seed's own lead-scoring example does. Humans in the loop:
steps of `type: human`, and on any other step `approval`, `compensate` and `budget`; the workflow
may set `goal`, `constraints`, `budget` and `prices`.
"""

from __future__ import annotations

from agentrun.lang import ir
from agentrun.lang.yamlpos import mapping_or_none

NAME = "pipeline"
MARKS = "a pipeline has 'workflow:' with agents: and steps:"
TRAITS = ir.Traits(numbered_steps=True, stores_with="a step's `output: {store_as: NAME}`")
EXAMPLES = (  # under examples/: what the docs run; beside them, *.replies.yaml are their recorded replies
    "pipelines/lead-scoring.yaml",
    "pipelines/research-to-proposal.yaml",
)


def detect(path: str, text: str) -> bool:
    """A YAML mapping whose `workflow:` is a mapping."""
    data = mapping_or_none(text)
    return data is not None and isinstance(data.get("workflow"), dict)
