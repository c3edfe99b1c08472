"""Starting a run on Temporal from what `explain.prepare` checked: its id, its memo and search
attributes, and the summary Temporal Web lists it with."""

from __future__ import annotations

import json
from typing import Any

from temporalio.api.enums.v1 import IndexedValueType, TaskQueueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from agentrun.client.runs import RunHandle, UsageError
from agentrun.models import contract
from agentrun.models.contract import RunInput
from agentrun.models.host_tools import queue_of


async def start_run(client: Client, inp: RunInput, run_id: str, task_queue: str, eager: bool = False) -> RunHandle:
    """Start the AgentRun workflow of `inp` as `run_id` on `task_queue`; UsageError if the id is taken
    or a host tool the spec names is bound nowhere."""
    await check_host_tools(client, inp)
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


BIND = (
    "bind each one before the run starts: in Python, a worker with the function, "
    "engine.worker(tools=[fetch_market_data]); or host_tools: in agentrun.yaml"
)


async def check_host_tools(client: Client, inp: RunInput) -> None:
    """Refuse, before anything runs, a run whose host tools no worker has (cycgraph's
    checkRequirements): a tool is bound when a worker of this program has it or any worker polls
    its queue; one of this program's must take the arguments the spec declares."""
    from agentrun.activities.host import REGISTERED
    from agentrun.policy.schemas import mismatch

    missing, wrong = [], []
    servers = {**inp.mcp_servers, **inp.plan.mcp_servers}
    for name, declared in inp.plan.host_tools.items():
        tool, binding = REGISTERED.get(name), inp.host_bindings.get(name)
        if binding is not None and binding.mcp and binding.server not in servers:
            wrong.append(f"host tool '{name}' is bound to MCP server '{binding.server}', which is declared nowhere")
        elif binding is not None:
            if binding.input_schema and (said := mismatch(declared, binding.input_schema)):
                wrong.append(f"host tool '{name}' does not take what the spec declares: {said}")
        elif tool is not None:
            if said := mismatch(declared, tool.spec.parameters):
                wrong.append(f"host tool '{name}' does not take what the spec declares: {said}")
        elif not await _polled(client, queue_of(name)):
            missing.append(name)
    if missing:
        listed = ", ".join(missing)
        raise UsageError(f"the spec needs host tools that no worker has: {listed}; {BIND}")
    if wrong:
        raise UsageError("; ".join(wrong))


async def _polled(client: Client, queue: str) -> bool:
    request = DescribeTaskQueueRequest(
        namespace=client.namespace,
        task_queue=TaskQueue(name=queue),
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
    )
    return bool((await client.workflow_service.describe_task_queue(request)).pollers)


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
