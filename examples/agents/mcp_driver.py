"""An agent that drives a behaviour tree itself over MCP, offline: the official MCP SDK's client
talking to `python -m client mcp` over stdio.

    python examples/agents/mcp_driver.py examples/trees/ship.yaml [TRACE_OUTPUT]

It starts an execution of the tree (or resumes the one at TRACE_OUTPUT), accepts the protocol, then
asks for each step and answers it the way examples/agents/tree_agent.py does: by running the step's
```sh blocks with the blackboard's values as environment variables, storing what they print as
`$VAR.name = value` with var_write. It stops when next_step says done or failure.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import uuid
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

sys.path.insert(0, str(Path(__file__).parent))
from tree_agent import BLOCK, RUNNING, run, writes  # noqa: E402

UNSAFE = re.compile(r"\W")


async def main(tree: str, address: str) -> int:
    server = StdioServerParameters(command=sys.executable, args=["-m", "agentrun.client", "mcp"], env=dict(os.environ))
    async with Client(server) as session:

        async def call(tool: str, **args: Any) -> dict[str, Any]:
            result = await session.call_tool(tool, {"trace_output": address, **args})
            if result.is_error:
                raise SystemExit(f"{tool}: {getattr(result.content[0], 'text', '')}")
            return result.structured_content or {}

        started = await session.call_tool("start_execution", {"tree_uri": tree, "trace_output": address})
        print(f"execution {address}: " + ("started" if not started.is_error else "resumed"))
        while True:
            step = await call("next_step")
            if "status" in step:
                print(f"tree {step['status']}")
                return 0 if step["status"] == "done" else 1
            await answer(call, step)


async def answer(call: Any, step: dict[str, Any]) -> None:
    text = step.get("instruction") or step.get("expression") or ""
    if step["name"] == "Acknowledge_Protocol":
        await call("submit", status="success", note="read the protocol")
        return
    env = {**os.environ, **values("VAR", await call("var_read")), **values("CONST", await call("const_read"))}
    code, output = run(BLOCK.findall(text), env) if BLOCK.search(text) else (0, "")
    for path, value in writes(output).items():
        await call("var_write", path=path, value=json.dumps(value))
    note = output.strip().splitlines()[-1][:200] if output.strip() else f"exit code {code}"
    print(f"  {step['type']:<8} {step['name']}: {note}")
    if step["type"] == "evaluate":
        await call("eval", result=code == 0, note=note)
    else:
        status = "success" if code == 0 else "running" if code == RUNNING else "failure"
        await call("submit", status=status, note=note)


def values(scope: str, found: dict[str, Any]) -> dict[str, str]:
    """A scope's values as environment variables, as the tree agent sets them."""
    return {scope + "_" + UNSAFE.sub("_", name): _text(value) for name, value in found.items()}


def _text(value: Any) -> str:
    return "" if value is None else value if isinstance(value, str) else json.dumps(value)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    trace = sys.argv[2] if len(sys.argv) > 2 else f"traces/{Path(sys.argv[1]).stem}-{uuid.uuid4().hex[:6]}.json"
    sys.exit(asyncio.run(main(sys.argv[1], trace)))
