"""Starting a run on Temporal from what `explain.prepare` checked: its id, its memo and search
attributes, and the summary Temporal Web lists it with."""

from __future__ import annotations

import json
from typing import Any

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest
from temporalio.client import Client
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from agentrun.client.runs import RunHandle, UsageError
from agentrun.models import contract
from agentrun.models.contract import RunInput


async def start_run(client: Client, inp: RunInput, run_id: str, task_queue: str, eager: bool = False) -> RunHandle:
    """Start the AgentRun workflow of `inp` as `run_id` on `task_queue`; UsageError if the id is taken."""
    try:
        return await client.start_workflow(
            "AgentRun",
            inp,
            id=run_id,
            task_queue=task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            request_eager_start=eager,
            **start_options(inp),
        )
    except WorkflowAlreadyStartedError:
        raise UsageError(f"a run with id '{run_id}' already exists; pick another --id") from None


def start_options(inp: RunInput) -> dict[str, Any]:
    """What every run starts with besides its input: its search attributes, its memo (the params it
    was given, which Temporal Web shows in the run's details, a fork's parent, and its inbox: the
    gates open, none yet), and the summary
    Temporal Web lists it with."""
    attrs = None
    parent = inp.fork.parent if inp.fork else None
    if inp.search_attributes:
        pairs = [SearchAttributePair(contract.SPEC, inp.plan.name), SearchAttributePair(contract.STATUS, "pending")]
        pairs += [SearchAttributePair(contract.PARENT, parent)] if parent else []
        pairs += [SearchAttributePair(contract.STARTED_BY, contract.BY_MCP)] if inp.driven else []
        attrs = TypedSearchAttributes(pairs)
    memo: dict[str, Any] = {contract.PARAMS_MEMO: _memo_params(inp.params)}
    # An empty inbox from the start: a listed run without one was started before runs kept it.
    memo[contract.INBOX_MEMO] = contract.empty_inbox(inp.plan.name)
    memo |= {contract.PARENT_MEMO: parent} if parent else {}
    if inp.driven:  # only the MCP server starts driven runs, and its tools act on these alone
        memo[contract.STARTED_BY_MEMO] = contract.BY_MCP
    return {"search_attributes": attrs, "memo": memo, "static_summary": _summary(inp)}


MEMO_PARAMS_CHARS = 4096  # a memo travels with every listing of the run: large params stay in the input


def _memo_params(params: dict[str, Any]) -> Any:
    text = json.dumps(params, default=str)
    if len(text) <= MEMO_PARAMS_CHARS:
        return params
    return f"{len(text)} characters of params: the run's input holds them (params)"


def _summary(inp: RunInput) -> str:
    plan, count = inp.plan, len(inp.plan.leaves())
    forked = f", forked from {inp.fork.parent} at {inp.fork.at}" if inp.fork else ""
    return f"{plan.name} ({plan.dialect}, {count} task{'' if count == 1 else 's'}{forked})"


async def ensure_search_attributes(client: Client) -> bool:
    """Register the engine's search attributes if the server allows it; False if they are unavailable."""
    wanted = {key.name for key in contract.SEARCH_ATTRIBUTES}
    try:
        listed = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=client.namespace)
        )
        missing = wanted - set(listed.custom_attributes)
        if missing:
            await client.operator_service.add_search_attributes(
                AddSearchAttributesRequest(
                    namespace=client.namespace,
                    search_attributes={name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD for name in missing},
                )
            )
        return True
    except RPCError:
        return False
