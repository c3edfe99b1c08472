"""What the pages show, read from Temporal with the code the CLI uses: the open questions with their
context, the list of runs, and one run's plan, live state and report."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from temporalio.client import Client
from temporalio.service import RPCError

from agentrun.client import humans, listing, status
from agentrun.client.no_worker import start_input
from agentrun.client.partial import partials
from agentrun.client.runs import describe, fetch_state
from agentrun.explain import graph, report
from agentrun.models.contract import TERMINAL, Gate, RunState, dollars, open_gates
from agentrun.models.texts.checkpoint_text import SUPERVISE_GATE
from agentrun.worker.connection import web_url


@dataclass
class Question:
    """An open gate with what a person needs to answer it."""

    run_id: str
    spec: str
    gate: Gate
    choices: list[str]
    draft: str  # what an approval guards: the output of its step, when there is one
    spent: str  # for a paused budget: what the run has used so far
    corrects: bool  # a supervised goal's gate: an answer other than approve or reject is a correction

    @property
    def key(self) -> str:
        return f"{self.run_id}/{self.gate.id}"


def questions_of(state: RunState) -> list[Question]:
    return [
        Question(
            run_id=state.run_id,
            spec=state.spec,
            gate=gate,
            choices=humans.choices(gate),
            draft=state.outputs.get(gate.node, "") if gate.kind == "approval" else "",
            spent=_spent(state) if gate.kind == "budget" else "",
            corrects=gate.kind == "approval" and gate.name.endswith(SUPERVISE_GATE),
        )
        for gate in open_gates(state)
    ]


async def inbox(client: Client) -> list[Question]:
    """Every open question across runs, newest first."""
    found = [q for state in await humans.waiting_states(client) for q in questions_of(state)]
    return sorted(found, key=lambda q: q.gate.opened_at.isoformat() if q.gate.opened_at else "", reverse=True)


def _spent(state: RunState) -> str:
    return f"used {state.total_tokens_used} tokens, {dollars(state.total_cost_usd)}, {state.iteration_count} prompts"


async def runs(client: Client, status_filter: str | None, spec: str | None, limit: int) -> list[dict[str, Any]]:
    """The runs `list` shows for the same filters, newest first."""
    query = listing.visibility_query(status_filter, spec)
    try:
        return [listing.row(wf) async for wf in client.list_workflows(query, limit=limit)]
    except RPCError as exc:
        raise humans.UsageError(f"Temporal cannot list runs with this filter: {exc.message}") from None


@dataclass
class RunPage:
    state: RunState
    plan: str  # the plan drawn as `inspect` draws it
    live: str  # `status`'s lines: each step's state, a running step's output so far
    report: str  # `report`'s markdown
    web: str | None  # the run on Temporal Web
    questions: list[Question]

    @property
    def ended(self) -> bool:
        return self.state.status in TERMINAL


async def run_page(client: Client, run_id: str) -> RunPage:
    state, live = await live_lines(client, run_id)
    inp = await start_input(client, run_id)
    return RunPage(
        state=state,
        plan=graph.draw(inp.plan) if inp else "(the run's plan cannot be read)",
        live=live,
        report=report.to_markdown(state),
        web=web_url(client, run_id),
        questions=questions_of(state),
    )


async def live_lines(client: Client, run_id: str) -> tuple[RunState, str]:
    """The run's state and its `status` lines, with what running steps have written so far."""
    desc = await describe(client, run_id)
    state = await fetch_state(client, run_id, desc)
    so_far = await partials(client, run_id, desc) if state.status in ("running", "waiting") else {}
    return state, "\n".join(status.lines(state, so_far))
