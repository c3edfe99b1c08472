"""The Python API's values say what they hold: every event has a docstring, the values of a
status and a gate kind are typed and listed in the docs with the words the command line prints,
and `connect` takes Temporal's address, namespace and the engine's task queue as arguments."""

from __future__ import annotations

import typing

import agentrun
from agentrun.models import run_words
from agentrun.models.names import RunStatus
from tests.conftest import ROOT

EVENTS = ("StepStarted", "StepFinished", "PartialOutput", "QuestionOpened", "QuestionAnswered", "NoteDelivered")


def test_every_event_says_what_it_is_and_its_statuses_and_kinds_are_typed():
    for name in (*EVENTS, "RunEnded"):
        event = getattr(agentrun, name)
        assert event.__doc__ and "__doc__" in vars(event), name
    assert typing.get_args(agentrun.QuestionOpened.model_fields["gate_kind"].annotation) == (
        "question",
        "approval",
        "budget",
    )
    assert agentrun.RunEnded.model_fields["status"].annotation is RunStatus
    assert set(typing.get_args(agentrun.StepFinished.model_fields["status"].annotation)) == {
        "completed",
        "failed",
        "skipped",
        "cancelled",
    }


def test_the_docs_give_each_status_and_the_word_the_command_line_prints():
    page = (ROOT / "docs" / "python-api.md").read_text()
    for status in typing.get_args(RunStatus):
        assert f"| `{status}` | {run_words.word(status)} |" in page, status


async def test_connect_takes_the_address_namespace_and_task_queue(address, monkeypatch, tmp_path):
    # Nothing in the environment names a server: the arguments do, and no embedded server starts.
    for name in ("TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "TEMPORAL_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AGENTRUN_STATE_DIR", str(tmp_path))
    engine = await agentrun.connect(address, namespace="default", task_queue="elsewhere")
    assert engine.temporal.service_client.config.target_host == address
    assert engine.temporal.namespace == "default" and engine.task_queue == "elsewhere"
    assert not (tmp_path / "temporal.pid").exists()
