"""The run page's flowchart of a plan (`inspect --format mermaid`), and the state each of its nodes
is drawn in: a map's box by its elements, a parallel step's head by its branches, a step asking a
person as waiting. Tests/test_run_page.py has Mermaid draw it in a browser."""

from __future__ import annotations

from agentrun.explain.flowchart import flowchart, states, with_states
from agentrun.ids import GateId
from agentrun.lang import ir
from agentrun.models.contract import Gate, RunState, TaskState


def _plan() -> ir.Plan:
    ir.build_models()
    task = lambda node_id, **more: ir.Task(id=node_id, agent="w", prompt=node_id.upper(), **more)  # noqa: E731
    root = ir.Sequence(
        id="root",
        children=[
            ir.Parallel(id="fan", children=[task("a"), task("b")]),
            ir.Map(id="each", over="{{ steps.a.output }}", body=task("score")),
            ir.Human(id="ok", prompt="Ship it?"),
            task("sum", fallback=task("guess")),
        ],
    )
    return ir.Plan(name="chart", dialect="pipeline", source="chart.yaml", spec_dir=".", root=root)


def _state(rows: dict[str, str], gate: str = "") -> RunState:
    tasks = {key: TaskState(id=key, status=status) for key, status in rows.items()}  # type: ignore[arg-type]
    gates = {gate: Gate(id=GateId(gate), name=gate, node=gate)} if gate else {}
    return RunState(run_id="r", spec="chart", status="running", tasks=tasks, gates=gates)


def test_a_plan_is_drawn_step_by_step_with_heads_branches_and_fallbacks():
    assert flowchart(_plan()).splitlines() == [
        "flowchart TD",
        '    n_fan(["fan: parallel"])',
        '    n_a["a"]',
        "    n_fan --> n_a",
        '    n_b["b"]',
        "    n_fan --> n_b",
        '    n_each["each: map of score"]',
        "    n_a --> n_each",
        "    n_b --> n_each",
        '    n_ok{{"ok: human"}}',
        "    n_each --> n_ok",
        '    n_sum["sum"]',
        '    n_guess["guess"]',
        '    n_sum -.->|"on failure"| n_guess',
        "    n_ok --> n_sum",
    ]


def test_each_node_is_drawn_in_the_state_of_its_rows():
    plan = _plan()
    running = _state({"a": "completed", "b": "running", "each[0]": "pending"})
    assert states(plan, running) == {"fan": "running", "a": "completed", "b": "running", "each": "pending"}
    # A map's elements together: one still to come keeps it running; one failed shows first.
    later = _state({"a": "completed", "b": "completed", "each[0]": "completed", "each[1]": "pending"}, gate="")
    assert states(plan, later)["each"] == "running" and states(plan, later)["fan"] == "completed"
    failed = _state({"each[0]": "completed", "each[1]": "failed"})
    assert states(plan, failed)["each"] == "failed"
    # The step asking a person is waiting, whatever its row says.
    asking = _state({"each[0]": "completed", "ok": "running"}, gate="ok")
    assert states(plan, asking)["ok"] == "waiting"
    assert states(plan, _state({"sum": "failed", "guess": "completed"})) == {"sum": "failed", "guess": "completed"}
    # A node folded into its map's box gets no state of its own: Mermaid would draw a box for it.
    assert "score" not in states(plan, _state({"score": "running", "each[0]": "running"}))

    chart = with_states(flowchart(plan), plan, running).splitlines()
    assert "    class n_a completed" in chart and "    class n_fan,n_b running" in chart
    assert not [line for line in chart if line.startswith("    class ") and "pending" in line]  # Mermaid's own look
