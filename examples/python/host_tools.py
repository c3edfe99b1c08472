"""A program's own function as an agent's tool. cycgraph's portable bundles name the tools they need
(`{type: custom, name: fetch_market_data}`, with its arguments in `manifest.requires.tools`) and
leave the host to bind them: this program binds the name to a function of its own and runs the
bundle, the model calling the function as it works. Give it a bundle, a sector and a model:

    python examples/python/host_tools.py market-analysis.bundle.json "grid storage" openai:gpt-4o-mini

The function's name, docstring and typed parameters are the tool the model is offered; a call with
arguments that do not fit is an error the model reads, and the function is not called. Each call
runs on this program's worker, as an activity of its own: a run that needs the tool waits for a
worker that has it, and `start` refuses a run whose tool no worker has.
"""

import sys

import agentrun


def fetch_market_data(sector: str, year: int, idempotency_key: str = "") -> dict:
    """Look up recent market figures for one sector from the warehouse."""
    # `idempotency_key` is not the model's to give: it is the same for every attempt of one call
    # (a call cut short by a crash runs again), so a service that records effects can tell them apart.
    return {"sector": sector, "year": year, "shipments_gwh": 412, "avg_price_usd_per_kwh": 108, "key": idempotency_key}


async def analyse(engine: agentrun.Engine, bundle: str, sector: str, agent: str) -> str:
    """The bundle's analysis of `sector`, the tool served by this program while the run goes on."""
    async with engine.worker(tools=[fetch_market_data]):
        run = await engine.start(bundle, params={"sector": sector}, agents=agent)
        result = await run.result()
    if not result.completed:
        raise SystemExit(f"{run.id} {result.status}: {'; '.join(result.errors)}")
    return result.state.memory["analysis"]


async def main() -> int:
    bundle, sector, agent = sys.argv[1:4]
    engine = await agentrun.connect()  # TEMPORAL_ADDRESS, else the embedded dev server
    print(await analyse(engine, bundle, sector, agent))
    return 0


if __name__ == "__main__":
    agentrun.run(main())
