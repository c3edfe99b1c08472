"""Ids that are parsed or compared, as types of their own, so pyright keeps a gate id from going
where a run id belongs. Each is a str at run time: pydantic reads and writes it as one."""

from __future__ import annotations

import uuid
from typing import NewType

RunId = NewType("RunId", str)  # a run's workflow id; a batch's is `<run>/<map key>/batch-<n>`
NodeId = NewType("NodeId", str)  # a plan node's id; a person names one by its last part (`install` for `setup.install`)
GateId = NewType("GateId", str)  # `budget`, `budget:<step>`, or a spec's gate id with `#N` for a round
AgentId = NewType("AgentId", str)  # an agent's id in a spec; --agent ID=URI or agentrun.yaml gives its URI


def new_run_id(spec: str) -> str:
    """A run's id when none is given: the spec's name and a random suffix."""
    return f"{spec}-{uuid.uuid4().hex[:8]}"
