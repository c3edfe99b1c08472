"""What a driven run (a behaviour tree an agent walks over MCP) answers the agent's calls: the
replies of its `next_step`, `eval`, `submit`, `think` and `var_write` updates. Each shape has only
the fields it sends, so an agent reads the same JSON as abtree's tools give."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel


class Finished(BaseModel):
    """next_step once the run has ended: `done`, or `failure`."""

    status: Literal["done", "failure"]


class EvaluateStep(BaseModel):
    """next_step: a condition for the agent to judge and answer with eval."""

    type: Literal["evaluate"] = "evaluate"
    name: str
    expression: str


class InstructStep(BaseModel):
    """next_step: an action for the agent to carry out and answer with submit."""

    type: Literal["instruct"] = "instruct"
    name: str
    instruction: str


class Said(BaseModel):
    """What an answer did (`evaluation_passed`, `step_complete`, `protocol_accepted`, …), or that
    next_step waits for a person (`waiting`), with a sentence for the agent."""

    status: str
    message: str


class Recorded(BaseModel):
    """think: the thought is in the trace."""

    status: Literal["recorded"] = "recorded"


class VarWritten(BaseModel):
    """var_write: the blackboard path written and its value."""

    path: str
    value: Any = None


NextStep = Finished | EvaluateStep | InstructStep | Said
DrivenReply = NextStep | Recorded | VarWritten
