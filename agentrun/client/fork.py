"""A fork (`fork RUN --at STEP`): a new run of RUN's plan (or of a changed spec, `--spec`, whose steps
are matched by id) that takes over, from RUN's record, every step before STEP (no agent is asked,
nothing is spent), makes the changes given and goes on from STEP. It records its parent in its memo and in the `AgentRunParent` search attribute."""

from __future__ import annotations

from temporalio.client import Client

from agentrun.client.models import ForkPlan
from agentrun.client.no_worker import start_input
from agentrun.client.runs import UsageError, describe, fetch_state, fetch_step_log
from agentrun.explain import changes, cut
from agentrun.lang import ir
from agentrun.models.contract import Fork
from agentrun.models.names import shared_queue


async def forked_input(
    client: Client, parent: str, at: str, wanted: changes.Wanted, task_queue: str | None = None
) -> ForkPlan:
    """The fork's input: the parent's, with its plan and params changed as `wanted` and the steps it
    takes over; and the task queue it goes on (`task_queue`, else the parent's shared queue). Raises
    NoSuchRun, UsageError or SpecError before anything starts."""
    desc = await describe(client, parent)
    started = await start_input(client, parent)
    if started is None:
        raise UsageError(f"cannot read what run {parent} was started with from its history; it cannot be forked")
    if started.driven:
        raise UsageError(f"run {parent} was walked by an agent over MCP; such a run cannot be forked")
    state = await fetch_state(client, parent, desc)
    if state.status == "compensated":
        raise UsageError(f"run {parent} was rolled back: what its steps did was undone, so there is nothing to reuse")
    state.step_log = state.step_log or await fetch_step_log(client, parent, desc)
    chosen = cut.choose(started.plan, state, at)
    plan = started.plan  # a run, and its fork, keep the plan they started with, unless asked
    if wanted.spec is not None:
        plan = changes.onto(plan, wanted.spec, started.params, [record.node for record in chosen.reuse])
    changed = changes.apply(plan, started.params, wanted)
    queue = task_queue or shared_queue(desc.task_queue, parent)  # start picks the worker
    # The notes people said, but for those a step taken over already read: the fork's prompts get them again.
    reused = {record.key for record in chosen.reuse}
    notes = [note for note in state.notes if note.delivered_to not in reused]
    fork = Fork(
        parent=parent, at=chosen.at, reuse=chosen.reuse, memory=changed.memory, changes=changed.said, notes=notes
    )
    return ForkPlan(
        input=started.model_copy(update={"plan": changed.plan, "params": changed.params, "fork": fork}),
        task_queue=queue,
        notes=chosen.notes,
        warnings=changed.warnings + _unsent_prompts(changed.plan, chosen, list(wanted.prompts)),
    )


def _unsent_prompts(plan: ir.Plan, chosen: cut.Cut, steps: list[str]) -> list[str]:
    """A new prompt for a step every run of which the fork takes over is only sent if the fork
    runs the step again: say so."""
    taken = {r.node for r in chosen.reuse}
    warnings = []
    for step in steps:
        node = cut.step_id(plan, step, "--prompt")
        if node in taken:
            warnings.append(
                f"--prompt {node}: warning: the fork takes over this step's runs before {chosen.at}; "
                "the new prompt is sent only to its runs from there on"
            )
    return warnings
