"""cycgraph side by side: each graph in tests/compat/cycgraph/ runs through the real
@cycgraph/orchestrator (a Node harness, its in-memory store) and through agentrun, each against its
own fake OpenAI-compatible server scripted identically. Compared: the node runs in order, the final
status, the final memory, and which agents were asked in what order, each seeing which values.

The prompts' wording differs on purpose (cycgraph writes memory as a JSON block in the system
message, agentrun as `Input:` in the user message), so requests are compared by the scripted values
each one carries, not by their text; the rest of the differences kept on purpose are listed in
PINNED, one per graph, and in the docs' "Coming from cycgraph: side by side" (docs/languages/state-graphs.md).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from agentrun.models.contract import RunState
from tests.fakes.openai_server import FakeOpenAI, Recorded
from tests.runs import answer, finish, open_gate, start_spec

pytestmark = pytest.mark.usefixtures("worker")

VERSION = "1.4.0"
HERE = Path(__file__).parent
GRAPHS = HERE / "cycgraph"
HARNESS = HERE / "cycgraph_harness.mjs"
# A value the fakes were scripted with or a run was given: what a request "sees" is which of these
# it carries, wherever the prompt puts them.
TOKEN = re.compile(r"\b[A-Z]+-[A-Z0-9]+\b")
ABSENT = "(absent)"  # a memory key one side did not write


def choice(name: str, why: str) -> str:
    return json.dumps({"next_node": name, "reasoning": why})


@dataclass
class Case:
    graph: str
    replies: dict[str, Any]  # agent id → its replies in order (the last repeats)
    params: dict[str, Any]
    decisions: list[str] = field(default_factory=list)  # answers to its approvals, in turn
    # Its agents are asked side by side (voters, a map's workers): in which order the requests
    # reach the fake is the scheduler's, on either side, so they are compared as a set.
    side_by_side: bool = False


CASES = [
    Case("linear", {"researcher": "NOTES-1", "writer": "NOTE-1"}, {"topic": "TOPIC-TIDES"}),
    Case(
        "router_cycle",
        {"writer": ["DRAFT-1", "DRAFT-2"], "reviewer": ["revise", "approved"], "publisher": "PUBLISHED-1"},
        {"topic": "TOPIC-TIDES"},
    ),
    Case(
        "supervisor",
        {
            "lead": [choice("research", "no notes yet"), choice("write", "notes are in"), choice("__done__", "done")],
            "researcher": "NOTES-1",
            "writer": "BRIEF-1",
        },
        {"topic": "TOPIC-TIDES"},
    ),
    Case(
        "map_synth",
        {"answerer": ["ANSWER-A", "ANSWER-B"], "merger": "SUMMARY-1"},
        {"questions": ["Q-A", "Q-B"]},
        side_by_side=True,
    ),
    Case(
        "voting",
        {"alice": "HEAD-X", "bob": "HEAD-Y", "carol": "HEAD-X"},
        {"topic": "TOPIC-TIDES"},
        side_by_side=True,
    ),
    Case("verifier", {"writer": ["DRAFT-1", "DRAFT-2"]}, {"topic": "TOPIC-TIDES"}),
    Case(
        "judge",
        {
            "writer": ["DRAFT-1", "DRAFT-2"],
            "judge": [json.dumps({"score": 0.5, "reasoning": "thin"}), json.dumps({"score": 0.9, "reasoning": "good"})],
        },
        {"topic": "TOPIC-TIDES"},
    ),
    Case("approval", {"writer": "DRAFT-1"}, {"topic": "TOPIC-TIDES"}, decisions=["approved"]),
    Case("json_reply", {"reviewer": '{"score": 0.9}', "publisher": "PUBLISHED-1"}, {"draft": "DRAFT-1"}),
]


VOTE = {  # the outcome agentrun also writes under vote_key
    "winner": "HEAD-X",
    "tally": {"HEAD-X": 2, "HEAD-Y": 1},
    "votes": [{"agent_id": a, "vote": v} for a, v in (("alice", "HEAD-X"), ("bob", "HEAD-Y"), ("carol", "HEAD-X"))],
    "strategy": "majority_vote",
}
# The differences kept on purpose, graph by graph, as `what: (ours, cycgraph's)`.
PINNED: dict[str, dict[str, Any]] = {
    # A map's worker runs and a vote's voters are node runs of their own here, listed after the node.
    "map_synth": {"visited": (["ask", "ask[0]", "ask[1]", "merge"], ["ask", "merge"])},
    "voting": {
        "visited": (["pick", "pick_voter_0", "pick_voter_1", "pick_voter_2"], ["pick"]),
        "memory.headline": (VOTE, ABSENT),
    },
    # A reply that is JSON is kept as data, so a condition can read its fields; cycgraph keeps the
    # text, so there `memory.review.score` is undefined and the run takes the other edge.
    "json_reply": {
        "visited": (["review", "publish"], ["review", "hold"]),
        "requests": ([("reviewer", ["DRAFT-1"]), ("publisher", ["DRAFT-1"])], [("reviewer", ["DRAFT-1"])]),
        "memory.review": ({"score": 0.9}, '{"score": 0.9}'),
        "memory.published": ("PUBLISHED-1", ABSENT),
    },
}


def spec_of(case: Case) -> dict[str, Any]:
    return yaml.safe_load((GRAPHS / f"{case.graph}.yaml").read_text())


def cache_folder() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "agentrun-tests" / "cycgraph"


@pytest.fixture(scope="session")
def cycgraph_package() -> Path:
    """@cycgraph/orchestrator installed once into a cache folder; later sessions reuse it."""
    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.skip("npm and node are not installed: the cycgraph comparison runs the real package under Node")
    major = subprocess.run(["node", "--version"], capture_output=True, text=True, check=True).stdout
    assert int(major.strip().lstrip("v").split(".")[0]) >= 20, f"cycgraph {VERSION} needs Node 20 or later, not {major}"
    folder = cache_folder()
    package = folder / "node_modules" / "@cycgraph" / "orchestrator"
    manifest = package / "package.json"
    if not manifest.exists() or json.loads(manifest.read_text())["version"] != VERSION:
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(folder), f"@cycgraph/orchestrator@{VERSION}"],
            check=True,
            capture_output=True,
            timeout=600,
        )
    return package


@dataclass
class Side:
    status: str
    visited: list[str]
    memory: dict[str, Any]
    requests: list[Recorded]


@pytest.fixture(scope="module")
def theirs(cycgraph_package: Path) -> dict[str, Side]:
    """Every case run by cycgraph in one Node process, each against a fake of its own."""
    fakes = {case.graph: FakeOpenAI(by_model=case.replies, api_key="sk-compat").start() for case in CASES}
    try:
        cases = [
            {
                "name": case.graph,
                "graph": spec_of(case),
                "agents": [{"id": agent, "model": agent} for agent in case.replies],
                "base_url": fakes[case.graph].url,
                "goal": spec_of(case)["description"],
                "memory": case.params,
                "decisions": case.decisions,
            }
            for case in CASES
        ]
        given = json.dumps({"package": str(cycgraph_package), "cases": cases})
        proc = subprocess.run(["node", str(HARNESS)], input=given, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        results = [
            json.loads(line[len("RESULT ") :]) for line in proc.stdout.splitlines() if line.startswith("RESULT ")
        ]
        return {r["name"]: Side(r["status"], r["visited"], r["memory"], fakes[r["name"]].requests) for r in results}
    finally:
        for fake in fakes.values():
            fake.stop()


async def ours(client, llm: FakeOpenAI, case: Case) -> Side:
    llm.by_model = dict(case.replies)
    agents = {agent: f"openai:{agent}" for agent in case.replies}
    handle = await start_spec(client, GRAPHS / f"{case.graph}.yaml", "openai:none", params=case.params, agents=agents)
    for decision in case.decisions:
        await open_gate(handle, "gate")
        await answer(handle, "gate", {"approved": "approve", "rejected": "reject"}[decision])
    state: RunState = await finish(client, handle)
    # The first entry is the graph's own step; the rest are its node runs, as cycgraph lists them.
    return Side(state.status, state.visited_nodes[1:], state.memory, list(llm.requests))


def seen(requests: list[Recorded]) -> list[tuple[str, list[str]]]:
    """Each request as the agent asked and the scripted values its messages carry."""
    out = []
    for r in requests:
        parts = [m.get("content") for m in r.body.get("messages") or []]
        text = "\n".join(p if isinstance(p, str) else json.dumps(p) for p in parts)
        out.append((r.model or "", sorted(set(TOKEN.findall(text)))))
    return out


def differences(mine: Side, real: Side, side_by_side: bool = False) -> dict[str, Any]:
    """Each way the two runs differ, as `what: (ours, cycgraph's)`; `side_by_side`: the order of
    the requests is not compared."""
    found: dict[str, Any] = {}
    if mine.status != real.status:
        found["status"] = (mine.status, real.status)
    if mine.visited != real.visited:
        found["visited"] = (mine.visited, real.visited)
    ours_seen, theirs_seen = seen(mine.requests), seen(real.requests)
    if side_by_side:
        ours_seen, theirs_seen = sorted(ours_seen), sorted(theirs_seen)
    if ours_seen != theirs_seen:
        found["requests"] = (ours_seen, theirs_seen)
    ours_, theirs_ = timeless(mine.memory), timeless(real.memory)
    for key in sorted(set(ours_) | set(theirs_)):
        if ours_.get(key, ABSENT) != theirs_.get(key, ABSENT):
            found[f"memory.{key}"] = (ours_.get(key, ABSENT), theirs_.get(key, ABSENT))
    return found


STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def timeless(memory: dict[str, Any]) -> dict[str, Any]:
    """Memory with a verifier's `evaluated_at` (when it ran, a UTC time as cycgraph writes it) checked
    and set aside: the two runs happen at different moments."""
    out = {}
    for key, value in memory.items():
        if isinstance(value, dict) and "evaluated_at" in value:
            assert STAMP.match(value["evaluated_at"]), value
            value = {k: v for k, v in value.items() if k != "evaluated_at"}
        out[key] = value
    return out


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.graph)
async def test_the_same_graph_does_the_same_here(client, llm, theirs, case: Case):
    """SAME, or exactly the differences kept on purpose (PINNED, and the docs say why)."""
    mine, real = await ours(client, llm, case), theirs[case.graph]
    assert differences(mine, real, case.side_by_side) == PINNED.get(case.graph, {})
