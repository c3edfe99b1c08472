"""An inbox in a few lines: start two releases, then, as a person's page would, list what runs ask
across the server, answer each run's one open question without naming its gate, and read back what
the agents were told and answered. examples/release.yaml with the local shell agent, offline.

    python examples/python/inbox.py
"""

import asyncio
import sys
from pathlib import Path

import agentrun

HERE = Path(__file__).resolve().parent
SPEC = HERE.parent / "release.yaml"
AGENT = f"command:{sys.executable} {HERE.parent / 'agents' / 'shell_agent.py'}"
ANSWERS = {"question": "Shipped from the inbox", "approval": "approve"}


async def answer_all(engine: agentrun.Engine, runs: list[agentrun.Run]) -> None:
    """Answer whatever the runs ask until they end, as a person working an inbox does."""
    ours = {run.id: run for run in runs}
    while any([(await run.info()).running for run in runs]):
        for question in (await engine.pending()).questions:
            run = ours.get(question.run_id)
            if run is None or question.kind is None:
                continue  # another program's run, or one no worker holds now
            answered = await run.answer(ANSWERS[question.kind], by="inbox")  # its one open gate
            print(f"  {run.id}: {answered.gate} <- {answered.value}")
        await asyncio.sleep(0.2)


async def main() -> int:
    engine = await agentrun.connect()  # TEMPORAL_ADDRESS, else the embedded dev server
    runs = [await engine.start(SPEC, params={"version": v}, agents=AGENT) for v in ("2.0.0", "2.1.0")]
    print("started " + ", ".join(run.id for run in runs))
    async with engine.worker():
        await answer_all(engine, runs)
    for run in runs:
        result = await run.result()
        prompts = [said.task async for said in run.conversation() if said.kind == "prompt"]
        print(f"{run.id} {result.status}; agents were asked for: {', '.join(prompts)}")
    return 0 if all([(await run.result()).completed for run in runs]) else 1


if __name__ == "__main__":
    agentrun.run(main())  # asyncio.run, then exit without the SDK's threads aborting the process
