"""A vote: the voter agents answer at once, each a task of its own; a voter that fails casts no
vote. The votes are counted (the most votes wins, or the most weight by voter agent id; a tie goes
to the vote of the voter listed first), or a judge agent picks the winner from them. Fewer valid
votes than the quorum fail the node, saying which voters gave none and why."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from temporalio import workflow

from agentrun.lang import ir
from agentrun.workflows.failures import TaskFailed
from agentrun.workflows.nodes.base import Handler
from agentrun.workflows.nodes.graph_agent import reply_object

if TYPE_CHECKING:
    from agentrun.workflows.runtime import Runtime
    from agentrun.workflows.scope import Scope

KIND = ir.Voting


async def execute(engine: Runtime, node: ir.Voting, scope: Scope) -> dict[str, Any]:
    key = str(scope.key)
    replies = await _ballots(engine, node, scope)
    votes, missing = [], []
    for voter, (reply, error) in zip(node.voters, replies):
        vote = _vote(reply, node.vote_key) if error is None else None
        if vote is None:
            missing.append(f"{voter.id} ({voter.agent}): {error or 'an empty vote'}")
        else:
            votes.append({"agent_id": voter.agent, "vote": vote})
    need = node.quorum or 1
    if len(votes) < need:
        why = "; ".join(missing)
        raise TaskFailed(
            key, f"quorum not met: {len(votes)} valid vote(s) of {len(node.voters)}, {need} needed ({why})"
        )
    if node.strategy == "llm_judge":
        return await _judged(engine, node, scope, votes)
    tally = _tally(votes, node.weights if node.strategy == "weighted_vote" else {})
    winner_text = max(tally, key=lambda text: tally[text])  # the first of the highest: dicts keep order
    winner = next(v["vote"] for v in votes if _text(v["vote"]) == winner_text)
    return {"winner": winner, "tally": tally, "votes": votes, "strategy": node.strategy}


async def _ballots(engine: Runtime, node: ir.Voting, scope: Scope) -> list[tuple[str, str | None]]:
    """Each voter's reply, or why it gave none; all voters at once."""
    running = [asyncio.ensure_future(engine.run(voter, scope)) for voter in node.voters]
    try:
        await workflow.wait(running)
    finally:
        unfinished = [fut for fut in running if not fut.done()]
        for fut in unfinished:
            fut.cancel()
        if unfinished:
            await workflow.wait(unfinished)
    found: list[tuple[str, str | None]] = []
    for fut in running:
        failure = fut.exception()
        if isinstance(failure, TaskFailed):
            found.append(("", failure.message))
        elif failure is not None:
            raise failure
        else:
            found.append((str(fut.result() or ""), None))
    return found


def _vote(reply: str, vote_key: str) -> Any:
    """The vote in a reply: its JSON object's `vote_key`, else the reply's text; None if empty."""
    data = reply_object(reply)
    vote = data.get(vote_key) if data is not None and vote_key in data else reply.strip()
    return None if vote is None or vote == "" else vote


def _text(vote: Any) -> str:
    """A vote as the tally counts it: text as it is, anything else as canonical JSON."""
    return vote.strip() if isinstance(vote, str) else json.dumps(vote, sort_keys=True, separators=(",", ":"))


def _tally(votes: list[dict[str, Any]], weights: dict[str, float]) -> dict[str, float]:
    tally: dict[str, float] = {}
    for v in votes:
        text = _text(v["vote"])
        tally[text] = tally.get(text, 0) + weights.get(v["agent_id"], 1)
    return {text: int(n) if float(n).is_integer() else n for text, n in tally.items()}


async def _judged(engine: Runtime, node: ir.Voting, scope: Scope, votes: list[dict[str, Any]]) -> dict[str, Any]:
    assert node.judge is not None
    key = str(scope.key)
    reply = await engine.run(node.judge, scope.with_values(input={"votes": votes}))
    data = reply_object(str(reply)) or {}
    if "winner" not in data:
        raise TaskFailed(key, f"the judge named no winner: {str(reply).strip()[:200]}")
    tally = _tally(votes, {})
    return {
        "winner": data["winner"],
        "tally": tally,
        "votes": votes,
        "strategy": node.strategy,
        "reasoning": str(data.get("reasoning") or ""),
    }


HANDLER = Handler(KIND, execute)
