"""Ids that are parsed or compared, as types of their own, so pyright keeps a gate id from going
where a run id belongs. Each is a str at run time: pydantic reads and writes it as one."""

from __future__ import annotations

from typing import NewType

RunId = NewType("RunId", str)  # a run's workflow id; a batch's is `<run>/<map key>/batch-<n>`
GateId = NewType("GateId", str)  # `budget`, `budget:<step>`, or a spec's gate id with `#N` for a round
