"""An MCP server written with the official SDK, for the engine's MCP tool sources to reach: over stdio
(`python -m tests.fakes.mcp_server`) or streamable HTTP (`--http PORT`, on 127.0.0.1).

Its tools leave traces a test can read: `count` appends a line per call to the file named by
FAKE_MCP_COUNT_FILE (so a test counts calls by their side effect), `environment` tells which
variables the server was started with, `crash` ends the server's process in the middle of a call,
`pid` names the process (a restart shows as a new one), `slow` takes its time, `tally` writes a line
to the count file when it starts and another when it ends, seconds later (a call cut short shows),
`parent_environment` reads its parent's /proc/<pid>/environ (what a sandbox must keep from it).

`--handshake-only` serves stdio in the initialize-handshake era alone, as the servers deployed
before the 2026-07-28 protocol do (and as clients that send `server/discover` and `initialize`
together, like cycgraph's, need).
"""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

COUNT_FILE = "FAKE_MCP_COUNT_FILE"

server = MCPServer(name="fake-mcp", log_level="WARNING")


@server.tool(description="Say the text back.")
def echo(text: str) -> str:
    return text


@server.tool(description="The text of a file.")
def read_file(path: str) -> str:
    return Path(path).read_text(encoding="utf-8")


@server.tool(description="Add two numbers.")
def add(a: float, b: float) -> str:
    return str(a + b)


@server.tool(description="Recent figures for one market sector (each call one line more in the count file).")
def market_figures(sector: str, year: int) -> dict[str, object]:
    path = os.environ.get(COUNT_FILE)
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(f"{sector} {year}\n")
    return {"sector": sector, "year": year, "shipments_gwh": 412, "source": "mcp"}


@server.tool(description="Count this call: one line more in the count file; returns the calls so far.")
def count(note: str = "") -> str:
    path = os.environ.get(COUNT_FILE)
    if not path:
        raise ToolError(f"{COUNT_FILE} is not set for this server")
    with open(path, "a", encoding="utf-8") as out:
        out.write(f"{os.getpid()} {note}\n")
    return str(len(Path(path).read_text(encoding="utf-8").splitlines()))


@server.tool(description="The names and values of the variables in this server's environment.")
def environment() -> dict[str, str]:
    return dict(os.environ)


@server.tool(description="The environment of this server's parent process as /proc shows it, or why it cannot.")
def parent_environment() -> str:
    try:
        return Path(f"/proc/{os.getppid()}/environ").read_bytes().decode("utf-8", "replace")
    except OSError as e:
        return f"unreadable: {e.strerror}"


@server.tool(description="This server's process id.")
def pid() -> str:
    return str(os.getpid())


@server.tool(description="End this server's process now, in the middle of the call.")
def crash() -> str:
    os._exit(3)


@server.tool(description="Answer after some seconds.")
async def slow(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@server.tool(description="Write start-NOTE to the count file, wait some seconds, then write done-NOTE.")
async def tally(note: str, seconds: float) -> str:
    path = os.environ.get(COUNT_FILE)
    if not path:
        raise ToolError(f"{COUNT_FILE} is not set for this server")
    with open(path, "a", encoding="utf-8") as out:
        out.write(f"start-{note}\n")
    await asyncio.sleep(seconds)
    with open(path, "a", encoding="utf-8") as out:
        out.write(f"done-{note}\n")
    return f"tallied {note}"


@server.tool(description="Fail as a tool does: an error the model reads.")
def fail(reason: str) -> str:
    raise ToolError(reason)


async def serve_handshake_only() -> None:
    from mcp.server.runner import serve_loop
    from mcp.server.stdio import stdio_server

    low = server._lowlevel_server  # the SDK's own stdio runner serves both eras; this one the older only
    async with stdio_server() as (read, write), low.lifespan(low) as state:
        await serve_loop(low, read, write, lifespan_state=state, init_options=low.create_initialization_options())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT")
    parser.add_argument("--handshake-only", action="store_true", help="serve the initialize-handshake era only")
    args = parser.parse_args()
    if args.http:
        asyncio.run(server.run_streamable_http_async(host="127.0.0.1", port=args.http))
    elif args.handshake_only:
        asyncio.run(serve_handshake_only())
    else:
        asyncio.run(server.run_stdio_async())


if __name__ == "__main__":
    main()
