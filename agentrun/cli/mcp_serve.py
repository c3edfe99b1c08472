"""`mcp`: serve behaviour-tree executions to an agent over MCP."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from rich.console import Console

from agentrun.cli.args import EXIT_OK, command, on_temporal, positive
from agentrun.errors import UsageError
from agentrun.models.names import TASK_QUEUE

if TYPE_CHECKING:
    from agentrun.client.engine import Engine


def add_commands(sub: Any) -> None:
    m = command(sub, "mcp", "serve behaviour-tree executions to an agent over MCP (stdio)", on_temporal(_mcp))
    m.add_argument("--http", type=positive, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT instead")
    m.add_argument("--task-queue", default=TASK_QUEUE, help="the task queue the executions run on")
    m.add_argument("--no-worker", action="store_true", help="do not run a worker in this process")
    m.add_argument(
        "--root",
        action="append",
        default=[],
        metavar="DIR",
        help="a folder whose trees it may read (repeat for more; default: the folder it is started in); "
        "the roots the MCP client declares are read too",
    )


async def _mcp(engine: Engine, args: argparse.Namespace, console: Console) -> int:
    from agentrun.mcp.server import serve  # the MCP SDK loads only for this command

    for root in args.root:
        if not os.path.isdir(root):
            raise UsageError(f"--root {root}: no such folder\n  hint: name a folder whose trees the agent may run")
    await serve(engine, args.task_queue, args.http, worker=not args.no_worker, roots=tuple(args.root))
    return EXIT_OK
