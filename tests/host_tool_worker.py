"""A program of its own that has the host tool fetch_market_data, for the crash test to kill -9:

    python -m tests.host_tool_worker ADDRESS LOG

Each call appends `start SECTOR` to LOG, and `end SECTOR` when it returns; a sector named `slow`
waits for a file `go` beside LOG first, so the test can kill the worker in the middle of the call."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

LOG = Path(sys.argv[2]) if len(sys.argv) > 2 else Path("calls.log")


async def fetch_market_data(sector: str, year: int) -> dict:
    """Recent figures for one sector."""
    with LOG.open("a") as out:
        out.write(f"start {sector}\n")
    while sector == "slow" and not (LOG.parent / "go").exists():
        await asyncio.sleep(0.05)
    with LOG.open("a") as out:
        out.write(f"end {sector}\n")
    return {"sector": sector, "year": year, "shipments_gwh": 412}


async def _serve(address: str) -> None:
    from temporalio.client import Client

    from agentrun.worker.blobs import data_converter
    from agentrun.worker.host_tools import serving_tools

    client = await Client.connect(address, data_converter=data_converter())
    async with serving_tools(client, [fetch_market_data]):
        print("worker polling", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(_serve(sys.argv[1]))
