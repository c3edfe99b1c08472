"""`python -m client mcp`: the behaviour-tree tools over MCP (the official SDK), stdio by default,
streamable HTTP with `--http PORT`. Each tool is one call to the engine's `executions`; the server keeps
nothing of its own, so it can be killed and started again at any time."""

from __future__ import annotations

import contextlib
import functools
import json
import os
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal
from urllib.parse import unquote, urlparse

from mcp.server.mcpserver import Context, ListRoots, MCPServer, Resolve
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ListRootsResult
from pydantic import Field

from agentrun.caller import user
from agentrun.client.engine import Engine
from agentrun.errors import ExecutionError
from agentrun.lang import roots as read_roots
from agentrun.models import limits
from agentrun.models.driven import DrivenReply

TraceOutput = Annotated[str, Field(description="The execution's address (for example ./traces/deploy-001.json).")]
Note = Annotated[str | None, Field(description="One sentence on why: the values that decided it. Kept in the trace.")]
Path = Annotated[str | None, Field(description="A dotted path inside the scope; leave out to read all of it.")]

Handler = Callable[..., Awaitable[Any]]

INSTRUCTIONS = (
    "Drive behaviour-tree executions: start_execution(tree_uri, trace_output), then loop next_step -> "
    "eval (for an evaluate step) or submit (for an instruct step) until next_step says done or failure. "
    "Read and write the blackboard with var_read, var_write and const_read."
)


def build(engine: Engine, task_queue: str, roots: tuple[str, ...] = ()) -> MCPServer:
    """The tools, reading trees only under `roots` (the current folder unless given) and the roots
    the MCP client declares; acting only on executions an MCP server started."""
    server = MCPServer(name="agentrun-behaviour-trees", instructions=INSTRUCTIONS, log_level="WARNING")
    own_roots = roots or (os.getcwd(),)

    async def call(work: Any) -> Any:
        try:
            return await work
        except ExecutionError as exc:
            raise ToolError(str(exc)) from None

    @server.tool(
        description="Leave a note for the next prompt of a run's step (or of any step). Any running run of this "
        f"Temporal server takes it; it is marked as sent through MCP, and at most {limits.NOTE_CHARS} characters."
    )
    async def say(run_id: str, text: str, step: str = "", by: str = "") -> dict[str, Any]:
        from agentrun.errors import UserError

        # The agent on the other end speaks for the person who started this server, not as them.
        sender = f"{by or user() or 'someone'} via MCP"
        try:
            note = await engine.run(run_id).say(text, step, sender)
        except UserError as exc:
            raise ToolError(str(exc)) from None
        return note.model_dump()

    @server.tool(
        description="The tool calls runs of this Temporal server wait to have approved (the policy's `ask`): each "
        "run, gate, step, tool, its whole arguments, a write's diff against the file as it is now, and the digest "
        "an answer names."
    )
    async def pending_tool_calls() -> dict[str, Any]:
        found = await engine.pending()
        return {"calls": [q.model_dump(mode="json") for q in found.questions if q.call is not None]}

    @server.tool(
        description="Answer a tool call's gate: approve (it runs once, with the arguments the digest names), "
        "approve-pattern (and every later call of the run its ask pattern takes) or reject (the agent reads the "
        "comment). Refused if the gate was answered already or asks about other arguments now."
    )
    async def answer_tool_call(
        run_id: str,
        gate: str,
        digest: Annotated[str, Field(description="The call's digest, as pending_tool_calls gives it.")],
        answer: Literal["approve", "approve-pattern", "reject"],
        comment: str = "",
        by: str = "",
    ) -> dict[str, Any]:
        from agentrun.errors import UserError

        sender = f"{by or user() or 'someone'} via MCP"  # as `say`: for the person who started this server
        run = engine.run(run_id)
        try:
            if answer == "reject":
                said = await run.reject(gate, comment, sender, digest=digest)
            else:
                said = await run.approve(gate, comment, sender, pattern=answer == "approve-pattern", digest=digest)
        except UserError as exc:
            raise ToolError(str(exc)) from None
        return said.model_dump(mode="json")

    @server.tool(description="Start a new execution of a behaviour tree file at an address of your choosing.")
    async def start_execution(
        tree_uri: Annotated[
            str, Field(description="Path to the tree's .yaml/.yml/.json file, under the server's folder or your roots.")
        ],
        trace_output: TraceOutput,
        client_roots: ClientRoots,
    ) -> dict[str, Any]:
        with read_roots.within(own_roots + root_folders(client_roots)):
            return await call(engine.executions.start(tree_uri, trace_output, task_queue))

    @server.tool(description="Where an existing execution is: its status, phase and whether the protocol is accepted.")
    async def resume_execution(trace_output: TraceOutput) -> dict[str, Any]:
        return await call(engine.executions.resume(trace_output))

    @server.tool(description="Start an execution over: state seeded again, progress and trace cleared.")
    async def reset_execution(trace_output: TraceOutput) -> dict[str, Any]:
        return await call(engine.executions.reset(trace_output))

    @server.tool(description="The next step: an evaluate, an instruct, or {status: done | failure}.")
    async def next_step(trace_output: TraceOutput) -> dict[str, Any]:
        return _reply(await call(engine.executions.next_step(trace_output)))

    @server.tool(name="eval", description="Answer an evaluate step: true if the precondition holds.")
    async def eval_(
        trace_output: TraceOutput,
        result: Annotated[bool, Field(description="true to advance, false to fail the action.")],
        note: Note = None,
    ) -> dict[str, Any]:
        return _reply(await call(engine.executions.eval_step(trace_output, result, note or "")))

    @server.tool(description="Report an instruct step: success, failure, or running (not finished yet).")
    async def submit(
        trace_output: TraceOutput,
        status: Literal["success", "failure", "running"],
        note: Note = None,
    ) -> dict[str, Any]:
        return _reply(await call(engine.executions.submit(trace_output, status, note or "")))

    @server.tool(description="Record a thought in the execution's trace.")
    async def think(trace_output: TraceOutput, thought: str) -> dict[str, Any]:
        return _reply(await call(engine.executions.think(trace_output, thought)))

    @server.tool(description="Read $VAR, the blackboard: all of it, or one dotted path.")
    async def var_read(trace_output: TraceOutput, path: Path = None) -> dict[str, Any]:
        return _object(await call(engine.executions.var_read(trace_output, path)))

    @server.tool(description="Write a $VAR value; the value is JSON-parsed when it parses, else kept as text.")
    async def var_write(trace_output: TraceOutput, path: str, value: str) -> dict[str, Any]:
        return _reply(await call(engine.executions.var_write(trace_output, path, parsed(value))))

    @server.tool(description="Read $CONST, the read-only values: all of them, or one dotted path.")
    async def const_read(trace_output: TraceOutput, path: Path = None) -> dict[str, Any]:
        return _object(await call(engine.executions.const_read(trace_output, path)))

    @server.tool(description="The whole execution document: status, phase, cursor, blackboard and trace.")
    async def get_execution(trace_output: TraceOutput) -> dict[str, Any]:
        return await call(engine.executions.get(trace_output))

    @server.tool(description="A slice of the execution's trace: entries from `from` up to, not including, `to`.")
    @_keywords({"from": "start", "to": "end"})
    async def read_trace(
        trace_output: TraceOutput,
        start: Annotated[int | None, Field(alias="from", description="The first entry, from 0.")] = None,
        end: Annotated[int | None, Field(alias="to", description="The entry to stop before.")] = None,
    ) -> dict[str, Any]:
        return await call(engine.executions.read_trace(trace_output, start, end))

    return server


def _ask_roots(ctx: Context) -> ListRoots | ListRootsResult:
    """Ask the client for its roots when it declares it has some (over either protocol revision:
    the SDK sends the request or batches it as input); no roots when it declares none."""
    capabilities = ctx.client_capabilities
    return ListRoots() if capabilities is not None and capabilities.roots is not None else ListRootsResult(roots=[])


ClientRoots = Annotated[ListRootsResult, Resolve(_ask_roots)]


def root_folders(listed: ListRootsResult) -> tuple[str, ...]:
    """The folders of the client's roots: file:// URIs on this machine; others are not folders."""
    paths = []
    for root in listed.roots:
        uri = urlparse(str(root.uri))
        if uri.scheme == "file" and uri.netloc in ("", "localhost"):
            paths.append(unquote(uri.path))
    return tuple(paths)


def _keywords(names: dict[str, str]) -> Callable[[Handler], Handler]:
    """A tool whose inputs are Python keywords (`from`, `to`): the SDK calls it by those names,
    which it takes under their field names. Its signature stays the tool's own, for the schema."""

    def wrap(tool: Handler) -> Handler:
        @functools.wraps(tool)
        async def called(**given: Any) -> Any:
            return await tool(**{names.get(key, key): value for key, value in given.items()})

        return called

    return wrap


def parsed(value: str) -> Any:
    """A written value: JSON when it parses (numbers, true, objects), else the text itself."""
    try:
        return json.loads(value)
    except ValueError:
        return value


def _reply(reply: DrivenReply) -> dict[str, Any]:
    """A driven run's reply as the agent reads it: the JSON object of its model."""
    return reply.model_dump(mode="json")


def _object(value: Any) -> dict[str, Any]:
    """Tool results are JSON objects; a scope is one already, a single value comes as {path, value}."""
    return value if isinstance(value, dict) else {"value": value}


async def serve(
    engine: Engine, task_queue: str, http_port: int | None, worker: bool, roots: tuple[str, ...] = ()
) -> None:
    """Serve the tools until the MCP client goes away, with a worker for the runs unless told not to."""
    server = build(engine, task_queue, roots)
    async with engine.worker(task_queue) if worker else contextlib.nullcontext():
        if http_port:
            await server.run_streamable_http_async(host="127.0.0.1", port=http_port)
        else:
            await server.run_stdio_async()
