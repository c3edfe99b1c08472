"""bash {command}: run a shell command in the work directory, as {stdout, stderr, exit_code}.

The policy decides first (agentrun.policy: banned commands, the denylist and allowlist), then the
paths the command names are checked (tools.commands: outside the work directory, protected files);
then the command runs in the sandbox (tools.sandbox) under the policy's time limit and resource
limits, behind the OS boundary (tools.wall): its own root with the work directory the only writable
place, and no network unless `[bash] allow_network`. Where the worker can make no boundary, bash is
refused unless the policy says `sandbox = "off"`. With `[bash] allow_domains`, the command reaches
those hosts through the worker's egress proxy (tools.egress), and nothing else. A command that runs
out of time is killed with all it started, and the model reads that it was.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import signal
from typing import Any

from temporalio import activity

from agentrun.activities.tools import commands, egress, sandbox, wall
from agentrun.activities.tools.base import Refused, ToolContext, ToolFailed, as_json
from agentrun.models.builtin_tools import BashArgs
from agentrun.policy import Asked, decide

# Why a command's process was ended, for the model: the limits it ran into.
_ENDED_BY: dict[int, str] = {
    signal.SIGXFSZ: "a file reached the policy's size limit",
    signal.SIGKILL: "killed (out of memory, or the time limit)",
    signal.SIGSEGV: "crashed (or ran out of memory)",
}


async def call(ctx: ToolContext, args: BashArgs) -> str:
    command = args.command
    decision = decide(ctx.policy, Asked("builtin", "bash", {"command": command}, workdir=ctx.workdir.root))
    if decision.refused:  # "ask": the workflow had a person approve it first
        raise Refused(decision.reason)
    reason = commands.path_refusal(command.strip(), ctx.policy, ctx.workdir.root)
    if reason:
        raise Refused(reason)
    room = await asyncio.to_thread(_room, ctx)
    limits = ctx.policy.limits
    timeout_s = ctx.policy.rule("bash").timeout_s or limits.bash_timeout_s
    async with contextlib.AsyncExitStack() as stack:
        if room is not None and _wants_proxy(ctx):
            room = dataclasses.replace(room, proxy=await stack.enter_async_context(egress.proxy(ctx.policy)))
        outcome = await sandbox.run_command(
            command,
            ctx.workdir.root,
            limits,
            timeout_s,
            key=ctx.idempotency_key,
            keep_chars=max(1000, ctx.output_chars // 2 - 200),
            heartbeat=_heartbeat,
            room=room,
        )
    stderr = outcome.stderr
    if room is not None:
        for rel in await asyncio.to_thread(wall.made_protected, ctx.policy, room):
            stderr += f"\n[removed {rel}: agents may not make a file that steers a run or holds secrets]"
    if outcome.exit_code is None:
        said = (outcome.stdout + outcome.stderr).strip()[-2000:]
        raise ToolFailed(
            f"command timed out after {timeout_s:g}s and was killed with everything it started"
            + (f"; its output so far ends with:\n{said}" if said else "")
        )
    result: dict[str, Any] = {"stdout": outcome.stdout, "stderr": stderr, "exit_code": outcome.exit_code}
    if outcome.signal:
        result["ended_by"] = _ended_by(outcome.signal)
    return as_json(result)


def _room(ctx: ToolContext) -> wall.Room | None:
    """The command's room behind the OS boundary; None when the policy turns it off. Where this
    worker can make no boundary, the command is refused: it would run with the worker's rights."""
    if not ctx.policy.sandbox:
        return None
    if not wall.layers().any:
        raise Refused(NO_BOUNDARY)
    return wall.room(ctx.policy, ctx.workdir.root)


def _wants_proxy(ctx: ToolContext) -> bool:
    """`[bash] allow_domains` without `allow_network`: the way out is the worker's egress proxy,
    reached from bwrap's network namespace (Landlock alone has no private loopback to serve it on)."""
    rule = ctx.policy.rule("bash")
    return bool(rule.allow_domains) and not rule.allow_network and bool(wall.layers().bwrap)


NO_BOUNDARY = (
    "bash is not available on this worker: it cannot confine a command (no user namespaces for "
    'bubblewrap, no Landlock), and the policy does not say sandbox = "off"'
)


def _ended_by(number: int) -> str:
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = f"signal {number}"
    return f"{name}: " + _ENDED_BY.get(number, "ended by a signal")


def _heartbeat() -> None:
    if activity.in_activity():
        activity.heartbeat()
