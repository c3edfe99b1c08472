"""Start a run from Python, serve it with a worker in this program, follow its events and answer
its questions: examples/release.yaml with the local shell agent, offline.

    python examples/python/follow_release.py
"""

import sys
from pathlib import Path

import agentrun

HERE = Path(__file__).resolve().parent
SPEC = HERE.parent / "release.yaml"
AGENT = f"command:{sys.executable} {HERE.parent / 'agents' / 'shell_agent.py'}"
ANSWERS = {"notes": "First stable release", "publish": "approve"}


async def main() -> int:
    engine = await agentrun.connect()  # TEMPORAL_ADDRESS, else the embedded dev server
    run = await engine.start(SPEC, params={"version": "1.0.0"}, agents=AGENT)
    print(f"started {run.id}")
    async with engine.worker():  # this program serves the run; any other worker could too
        async for event in run.events(partial=False):
            match event:
                case agentrun.StepFinished(step=step, status=status):
                    print(f"  {step}: {status}")
                case agentrun.QuestionOpened(gate=gate, prompt=prompt):
                    print(f"  ? {prompt} -> {ANSWERS[gate]}")
                    await run.answer(ANSWERS[gate], gate=gate, by="example")
                case agentrun.RunEnded(status=status):
                    print(f"run {run.id} {status}")
        result = await run.result()
    return 0 if result.completed else 1


if __name__ == "__main__":
    agentrun.run(main())  # asyncio.run, then exit without the SDK's threads aborting the process
