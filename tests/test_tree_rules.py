"""Every node rule of a behaviour tree, in both ways it runs: the engine walks the tree and asks
its agent (a real OpenAI-compatible server on loopback), and the agent walks it itself, answering
the run's updates as the MCP tools do (client.executions, the code behind each tool)."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agentrun.client import executions
from agentrun.models.driven import EvaluateStep, Finished, InstructStep, Said
from tests.conftest import TEST_QUEUE
from tests.runs import run_spec
from tests.trees import Brain, action, by_action, composite, tree_file

pytestmark = pytest.mark.usefixtures("worker")

PASS, FAIL = True, False


@dataclass
class Case:
    root: dict[str, Any]
    answers: list[tuple[Any, ...]]  # in the order a driving agent is handed the steps
    done: bool
    var: dict[str, Any] = field(default_factory=dict)
    final_var: dict[str, Any] | None = None
    fragments: dict[str, dict[str, Any]] = field(default_factory=dict)  # files a $ref names
    engine: bool = True  # walked by the engine too (its parallel branches race: tested on their own)


def counter_action(name: str, retries: int | None = None) -> dict[str, Any]:
    return action(name, "instruct: Add one to $VAR.counter.", "evaluate: $VAR.counter is above 3.", retries=retries)


CASES: dict[str, Case] = {
    "sequence succeeds": Case(
        composite("sequence", "Root", action("A", "instruct: a"), action("B", "instruct: b")),
        [("instruct", "A", "success"), ("instruct", "B", "success")],
        done=True,
    ),
    "sequence aborts on failure": Case(
        composite("sequence", "Root", action("A", "instruct: a"), action("B", "instruct: b")),
        [("instruct", "A", "failure")],
        done=False,
    ),
    "selector first wins": Case(
        composite("selector", "Root", action("A", "instruct: a"), action("B", "instruct: b")),
        [("instruct", "A", "success")],
        done=True,
    ),
    "selector falls through": Case(
        composite("selector", "Root", action("A", "evaluate: a holds", "instruct: a"), action("B", "instruct: b")),
        [("evaluate", "A", FAIL), ("instruct", "B", "success")],
        done=True,
    ),
    "selector fails when every child fails": Case(
        composite("selector", "Root", action("A", "instruct: a"), action("B", "instruct: b")),
        [("instruct", "A", "failure"), ("instruct", "B", "failure")],
        done=False,
    ),
    "action retries succeed on the fourth attempt, $VAR kept": Case(
        composite("sequence", "Root", counter_action("Count", retries=3)),
        [
            *[
                step
                for n in (1, 2, 3)
                for step in (("instruct", "Count", "success", {"counter": n}), ("evaluate", "Count", FAIL))
            ],
            ("instruct", "Count", "success", {"counter": 4}),
            ("evaluate", "Count", PASS),
        ],
        done=True,
        var={"counter": 0},
        final_var={"counter": 4},
    ),
    "action retries exhausted": Case(
        composite("sequence", "Root", counter_action("Count", retries=1), action("After", "instruct: x")),
        [
            ("instruct", "Count", "success", {"counter": 1}),
            ("evaluate", "Count", FAIL),
            ("instruct", "Count", "success", {"counter": 2}),
            ("evaluate", "Count", FAIL),
        ],
        done=False,
        var={"counter": 0},
        final_var={"counter": 2},
    ),
    "retries on an inner sequence": Case(
        composite(
            "sequence",
            "Root",
            composite("sequence", "Inner", action("Prep", "instruct: p"), counter_action("Count"), retries=1),
            action("After", "instruct: x"),
        ),
        [
            ("instruct", "Prep", "success"),
            ("instruct", "Count", "success", {"counter": 1}),
            ("evaluate", "Count", FAIL),
            ("instruct", "Prep", "success"),
            ("instruct", "Count", "success", {"counter": 4}),
            ("evaluate", "Count", PASS),
            ("instruct", "After", "success"),
        ],
        done=True,
        var={"counter": 0},
        final_var={"counter": 4},
    ),
    "retries on an inner parallel": Case(
        composite(
            "sequence",
            "Root",
            action("Pre", "instruct: pre"),
            composite(
                "parallel",
                "Both",
                action("Always", "instruct: always"),
                action("Second_Try", "instruct: bump", "evaluate: $VAR.attempts is at least 2"),
                retries=1,
            ),
            action("Post", "instruct: post"),
        ),
        [
            ("instruct", "Pre", "success"),
            ("instruct", "Always", "success"),
            ("instruct", "Second_Try", "success", {"attempts": 1}),
            ("evaluate", "Second_Try", FAIL),
            ("instruct", "Always", "success"),
            ("instruct", "Second_Try", "success", {"attempts": 2}),
            ("evaluate", "Second_Try", PASS),
            ("instruct", "Post", "success"),
        ],
        done=True,
        var={"attempts": 0},
        final_var={"attempts": 2},
    ),
    "parallel one fails": Case(
        composite("parallel", "Root", action("A", "instruct: a"), action("B", "instruct: b")),
        [("instruct", "A", "failure")],
        done=False,
        engine=False,
    ),
    "$ref pastes in a fragment, which may $ref another": Case(
        composite("sequence", "Root", {"$ref": "./parts/checks.json"}, action("After", "instruct: x")),
        [("instruct", "Lint", "success"), ("instruct", "Unit", "success"), ("instruct", "After", "success")],
        done=True,
        fragments={
            "parts/checks.json": composite(
                "sequence", "Checks", action("Lint", "instruct: lint"), {"$ref": "unit.json"}
            ),
            "parts/unit.json": action("Unit", "instruct: unit"),
        },
    ),
    "parallel all succeed": Case(
        composite(
            "parallel", "Root", action("A", "instruct: a"), action("B", "instruct: b"), action("C", "instruct: c")
        ),
        [("instruct", "A", "success"), ("instruct", "B", "success"), ("instruct", "C", "success")],
        done=True,
    ),
}


def _tree(tmp_path: Path, case: Case) -> Path:
    for name, node in case.fragments.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(json.dumps(node))
    return tree_file(tmp_path, case.root, var=case.var)


@pytest.mark.parametrize("name", [name for name, case in CASES.items() if case.engine])
async def test_engine_walks_the_tree(client, llm, tmp_path, name):
    case = CASES[name]
    brain = Brain(list(case.answers))
    llm.reply = brain
    state = await run_spec(client, _tree(tmp_path, case), "openai:tree")
    assert state.status == ("completed" if case.done else "failed"), state.errors
    assert by_action(brain.asked) == by_action([(a[0], a[1]) for a in case.answers])
    assert brain.script == []
    if case.final_var is not None:
        assert state.memory == case.final_var


@pytest.mark.parametrize("name", list(CASES))
async def test_agent_drives_the_tree(client, tmp_path, name):
    case = CASES[name]
    address = f"traces/{uuid.uuid4().hex[:8]}.json"
    await executions.start_execution(client, str(_tree(tmp_path, case)), address, TEST_QUEUE)
    await accept_protocol(client, address)
    for answer in case.answers:
        step = await executions.next_step(client, address)
        assert isinstance(step, EvaluateStep | InstructStep), step
        assert (step.type, step.name) == answer[:2]
        await give(client, address, answer)
    assert await executions.next_step(client, address) == Finished(status="done" if case.done else "failure")
    if case.final_var is not None:
        assert await executions.var_read(client, address) == case.final_var


async def test_a_cyclic_ref_is_refused_before_anything_runs(client, tmp_path):
    (tmp_path / "a.json").write_text(json.dumps({"$ref": "b.json"}))
    (tmp_path / "b.json").write_text(json.dumps(composite("sequence", "B", {"$ref": "a.json"})))
    tree = tree_file(tmp_path, composite("sequence", "Root", {"$ref": "./a.json"}))
    with pytest.raises(executions.ExecutionError, match="cycl"):
        await executions.start_execution(client, str(tree), f"traces/{uuid.uuid4().hex[:8]}.json", TEST_QUEUE)


async def accept_protocol(client, address: str) -> None:
    step = await executions.next_step(client, address)
    assert isinstance(step, InstructStep) and step.name == "Acknowledge_Protocol"
    said = await executions.submit(client, address, "success")
    assert said.status == "protocol_accepted"


async def give(client, address: str, answer: tuple[Any, ...]) -> Said:
    if answer[0] == "evaluate":
        return await executions.eval_step(client, address, answer[2], "judged")
    for path, value in (*answer, {})[3].items():
        await executions.var_write(client, address, path, value)
    return await executions.submit(client, address, answer[2], "did it")
