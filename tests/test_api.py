"""The engine as a library, used as a program would use it: `agentrun.connect()`'s Engine starts a
run of a spec, a worker inside the test's own event loop serves it, the program follows its events
(and again from the middle, from a new handle, as after a reconnect), answers its gates, leaves a
note and forks it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import agentrun
from agentrun.client.engine import Engine
from tests.conftest import ROOT, SHELL_AGENT, run_id

QUEUE = "api-tests"


@pytest.fixture
def release(tmp_path: Path) -> Path:
    spec = tmp_path / "release.yaml"
    shutil.copy(ROOT / "examples" / "release.yaml", spec)
    return spec


async def follow(run: agentrun.Run, answers: dict[str, str]) -> list[agentrun.RunEvent]:
    """Every event of the run to its end; a gate in `answers` is answered when it opens (an approval
    gets a note for its step first)."""
    seen: list[agentrun.RunEvent] = []
    async for event in run.events(partial=False):
        seen.append(event)
        if isinstance(event, agentrun.QuestionOpened) and event.gate in answers:
            if event.gate_kind == "approval":
                await run.say("Publish it quietly.", step="publish", by="ana")
            await run.answer(answers[event.gate], gate=event.gate, by="ana")
    return seen


async def test_start_follow_answer_say_fork(client, release: Path):
    engine = Engine(client, task_queue=QUEUE)
    run = await engine.start(release, params={"version": "2.0.0"}, agents=SHELL_AGENT, run_id=run_id("api"))
    waiting = await engine.runs(spec="release", limit=100)  # a run that has not ended is listed too
    assert next(r for r in waiting if r.run_id == run.id).ended is None
    async with engine.worker():
        events = await follow(run, {"notes": "First stable", "publish": "approve"})
        result = await run.result()
    assert result.status == "completed", result.errors
    assert (release.parent / "release-work" / "PUBLISHED-2.0.0").read_text() == "2.0.0: First stable\n"
    told = [(e.kind, getattr(e, "step", "") or getattr(e, "gate", "")) for e in events]
    assert told[:3] == [("step.started", "notes"), ("question.opened", "notes"), ("question.answered", "notes")]
    assert ("note.delivered", "publish") in told
    assert told.index(("question.answered", "publish")) < told.index(("step.finished", "publish"))
    assert told[-1] == ("run.ended", "")
    assert [e.id for e in events] == sorted(e.id for e in events)  # told in order, each once
    answered = next(e for e in events if isinstance(e, agentrun.QuestionAnswered) and e.gate == "notes")
    assert (answered.value, answered.by) == ("First stable", "ana")

    # A program that reconnects resumes after the last event it saw: the rest, nothing twice.
    middle = events[len(events) // 2].id
    resumed = [e async for e in engine.run(run.id).events(after=middle)]
    assert [e.id for e in resumed] == [e.id for e in events if e.id > middle]

    # A fork at `publish` takes the tag over and asks for the approval again.
    forked = await run.fork(at="publish", params={"version": "2.0.0"})
    async with engine.worker():
        await follow(forked, {"publish": "reject"})
        ended = await forked.result()
    state = ended.state
    assert state.parent == run.id
    assert state.tasks["tag"].reused_from == run.id
    assert state.gates["publish"].answer.value == "reject"

    listed = await engine.runs(spec="release", limit=100)
    assert {run.id, forked.id} <= {r.run_id for r in listed}


async def test_a_spec_given_as_text_and_its_mistakes(client, tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    engine = Engine(client, task_queue=QUEUE)
    text = "name: inline\nsubtasks:\n  hello:\n    instructions: |\n      ```sh\n      echo hi\n      ```\n"
    run = await engine.start(text, agents=SHELL_AGENT)
    async with engine.worker():
        result = await run.result()
    assert result.status == "completed"
    assert "hi" in result.outputs["hello"]
    with pytest.raises(agentrun.SpecError) as refused:
        await engine.start("name: broken\nsubtasks:\n  a:\n    instructionz: x\n", agents=SHELL_AGENT)
    assert "<spec>.yaml:4" in str(refused.value)


@pytest.mark.quick
def test_the_python_example_runs_as_written(address, tmp_path):
    """examples/python/follow_release.py, the docs' "Use it from Python", run as a user runs it."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "TEMPORAL_ADDRESS": address, "AGENTRUN_STATE_DIR": str(tmp_path / "state")}
    example = ROOT / "examples" / "python" / "follow_release.py"
    done = subprocess.run([sys.executable, str(example)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("started release-")
    assert "  ? One line for the release notes of 1.0.0? -> First stable release" in lines
    assert "  publish: completed" in lines
    assert lines[-1].endswith(" completed")


async def test_what_the_commands_use_pending_an_unnamed_gate_a_queued_answer_and_the_conversation(client, release):
    """The calls the command line is made of, from a program: the open question across runs, an
    answer with no gate named (the one open), an approval queued in the run's history, the prompts
    and replies read back."""
    engine = Engine(client, task_queue=QUEUE)
    run = await engine.start(release, params={"version": "3.0.0"}, agents=SHELL_AGENT, run_id=run_id("api-cli"))
    async with engine.worker():
        async for event in run.events(partial=False):
            if not isinstance(event, agentrun.QuestionOpened):
                continue
            asked = [q for q in (await engine.pending()).questions if q.run_id == run.id]
            assert [(q.gate, q.kind) for q in asked] == [(event.gate, event.gate_kind)]
            if event.gate == "notes":
                answered = await run.answer("Third", by="ana")
                assert (answered.gate, answered.value, answered.by) == ("notes", "Third", "ana")
            else:
                queued = await run.queue_answer("approve", by="ana")
                assert queued.gate == "publish"
        result = await run.result()
    assert result.status == "completed", result.errors
    assert (release.parent / "release-work" / "PUBLISHED-3.0.0").read_text() == "3.0.0: Third\n"
    assert not (await run.info()).running
    said = [(s.task, s.kind) async for s in run.conversation()]
    assert said.index(("tag", "prompt")) < said.index(("tag", "reply")) < said.index(("publish", "prompt"))
    assert await engine.count_runs(spec="release") >= 1
    with pytest.raises(agentrun.NoSuchRun):
        await engine.run("no-such-run").info()


def test_the_inbox_example_answers_each_runs_questions_and_reads_the_conversation(address, tmp_path):
    """examples/python/inbox.py: two runs, their questions found through `pending()` and answered
    without naming a gate, what their agents were asked read back from the history."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "TEMPORAL_ADDRESS": address, "AGENTRUN_STATE_DIR": str(tmp_path / "state")}
    example = ROOT / "examples" / "python" / "inbox.py"
    done = subprocess.run([sys.executable, str(example)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    started = lines[0].removeprefix("started ").split(", ")
    assert len(started) == 2
    for rid in started:
        assert f"  {rid}: notes <- Shipped from the inbox" in lines
        assert f"  {rid}: publish <- approve" in lines
        assert f"{rid} completed; agents were asked for: tag, publish" in lines
