"""A vote: voter agents answer at once, then a tally or a judge picks the winner."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentrun.explain.views.base import Agents, Entry, Scope, Shown
from agentrun.explain.views.leaves import LeafView
from agentrun.explain.views.words import sub_tag
from agentrun.lang import ir

if TYPE_CHECKING:
    from agentrun.explain.describe import Describer, DryRun


class VotingView(LeafView[ir.Voting]):
    def describe(self, node: ir.Voting, at: Entry, gets: str, inspect: Describer) -> list[str]:
        return self.with_details(node, at, f"{vote_text(node)}; each voter gets {gets}", inspect.who)

    def dry_run(self, node: ir.Voting, at: Entry, scope: Scope, dry: DryRun) -> list[str]:
        lines = self.with_details(node, at, vote_text(node) + ", counted at run time", dry.who)
        for i, voter in enumerate(node.voters):
            lines += dry.step(voter, sub_tag(at.tag, i), at.indent, scope)
        if node.judge is not None:
            votes = {"votes": Shown("<the votes>")}
            lines += dry.step(node.judge, sub_tag(at.tag, len(node.voters)), at.indent, {**scope, "input": votes})
        return lines

    def box_text(self, node: ir.Voting, agents: Agents) -> str:
        return f"vote {node.id}"


def vote_text(node: ir.Voting) -> str:
    voters = ", ".join(v.agent for v in node.voters)
    how = {
        "majority_vote": "the most votes win",
        "weighted_vote": "the most weight wins"
        + (" (" + ", ".join(f"{a} ×{w:g}" for a, w in node.weights.items()) + ")" if node.weights else ""),
        "llm_judge": f"judge {node.judge.agent if node.judge else '?'} picks the winner",
    }[node.strategy]
    quorum = f"; at least {node.quorum} valid votes" if node.quorum else ""
    return f"vote {node.id}: {voters} vote at once, {how}{quorum}; the outcome goes to {node.vote_key}"
