"""A state graph's mistakes said before any run, each with file:line:column and a hint."""

from __future__ import annotations

import pytest

from spec import params
from spec.errors import SpecError
from spec.load import load
from tests.conftest import write_spec

BASE = """name: g
nodes:
  - {id: a, type: agent, read_keys: [topic]}
  - {id: b, type: agent}
edges:
  - {source: a, target: b}
start_node: a
end_nodes: [b]
"""


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (
            ("{id: b, type: agent}", "{id: b, type: agnet}"),
            ":4:13: error: node 'b' has type 'agnet', which graphs do not have\n  hint: did you mean 'agent'?",
        ),
        (("target: b}", "target: c}"), ":6:17: error: edge target 'c' is not a node of the graph"),
        (("start_node: a", "start_node: x"), ":7:1: error: start_node 'x' is not a node of the graph"),
        (("  - {source: a, target: b}\n", ""), ":4:5: error: node 'b' cannot be reached from the start node"),
        (("name: g\n", "name: g\nstrict_keys: true\n"), ":4:26: error: node 'a' reads 'topic', which no node writes"),
    ],
)
def test_a_graph_mistake_is_said_where_it_is(tmp_path, change, said):
    spec = write_spec(tmp_path, BASE.replace(*change), name="g.yaml")
    with pytest.raises(SpecError) as caught:
        load(str(spec))
    assert said in str(caught.value)


def test_a_supervisor_managing_an_unknown_node_and_an_input_breaking_its_schema(tmp_path):
    text = BASE.replace("{id: b, type: agent}", "{id: b, type: supervisor, managed_nodes: [a, c]}")
    with pytest.raises(SpecError, match=r"g.yaml:4:\d+: error: supervisor 'b' manages 'c', which is not a node"):
        load(str(write_spec(tmp_path, text, name="g.yaml")))
    typed = BASE + "inputs:\n  topic: {schema: {type: string, minLength: 3}, required: true}\n"
    plan = load(str(write_spec(tmp_path, typed, name="g.yaml")))
    with pytest.raises(SpecError, match="param 'topic': 'ab' is too short"):
        params.bind(plan, {"topic": "ab"})
