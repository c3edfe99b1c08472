"""Workers for host tools: one per tool, on the tool's own task queue (models.host_tools), so a run's
call of the tool goes only to a worker of a program that has it, and waits while none runs."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterable
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from agentrun.activities.host import REGISTERED, HostTool
from agentrun.worker import GRACEFUL_SHUTDOWN_S
from agentrun.worker.failures import with_plain_failures

THROTTLE = timedelta(seconds=1)  # heartbeats as the main worker's (worker.build.HEARTBEAT_THROTTLE)


def host_tools(tools: Iterable[Callable[..., Any] | HostTool]) -> list[HostTool]:
    """The tools as HostTools; a name given twice is refused (which function would answer it?)."""
    found: dict[str, HostTool] = {}
    for item in tools:
        tool = HostTool.of(item)
        if tool.name in found:
            raise ValueError(f"two host tools are named {tool.name!r}")
        found[tool.name] = tool
    return list(found.values())


def build_tool_workers(
    client: Client, tools: Iterable[Callable[..., Any] | HostTool], max_concurrent_activities: int = 100
) -> list[Worker]:
    """A worker for each tool, on its queue."""
    workers = []
    for tool in host_tools(tools):
        workers.append(
            Worker(
                with_plain_failures(client),
                task_queue=tool.queue,
                activities=tool.activities(),
                max_concurrent_activities=max_concurrent_activities,
                graceful_shutdown_timeout=timedelta(seconds=GRACEFUL_SHUTDOWN_S),
                max_heartbeat_throttle_interval=THROTTLE,
                default_heartbeat_throttle_interval=THROTTLE,
            )
        )
    return workers


@contextlib.asynccontextmanager
async def serving_tools(
    client: Client, tools: Iterable[Callable[..., Any] | HostTool], max_concurrent_activities: int = 100
) -> AsyncIterator[list[HostTool]]:
    """The tools served while the block runs; runs started in this program count them as bound."""
    served = host_tools(tools)
    async with contextlib.AsyncExitStack() as stack:
        for worker in build_tool_workers(client, served, max_concurrent_activities):
            await stack.enter_async_context(worker)
        REGISTERED.update({tool.name: tool for tool in served})
        try:
            yield served
        finally:
            for tool in served:
                REGISTERED.pop(tool.name, None)
