"""What `client start` hands the AgentRun workflow."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from spec import ir

DEFAULT_MAX_ITERATIONS = 25
TASK_QUEUE = "agentrun"


class RunInput(BaseModel):
    plan: ir.Plan
    params: dict[str, Any] = {}
    workdir: str
    default_agent: str
    agents: dict[str, str] = {}  # agent id -> URI, overriding the default
    resume_from: str | None = None
    max_iterations: int | None = None
    lenient: bool = False
    heartbeat_s: float = 30.0
    search_attributes: bool = True
    prices: dict[str, ir.Price] = {}  # a price table from the command line; the spec's own wins

    def agent_uri(self, agent_id: str) -> str:
        return self.agents.get(agent_id, self.default_agent)
