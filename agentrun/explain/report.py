"""The execution report, in the layout of the "Reporting" section of the seed with numbered steps."""

from __future__ import annotations

import json
import statistics
from collections import Counter

from agentrun.explain import tool_uses
from agentrun.explain.outputs import fenced
from agentrun.models import run_words
from agentrun.models.contract import (
    RunState,
    SpawnedAgent,
    SubgraphRun,
    TaskState,
    Verdict,
    batch_id,
    dollars,
    limits_text,
)
from agentrun.models.elements import Page

MEMORY_CHARS = 200  # of each memory value in the report; `report --format json` has them whole


def verdict(state: RunState) -> str:
    """The run's word (models.run_words), as `status`, `list` and the page say it."""
    return run_words.word(state.status)


def partial(state: RunState) -> str:
    """What an ended run is missing (skipped steps, steps not completed), '' when nothing is."""
    counts = step_counts(state)
    return run_words.partial(state.status, counts.total(), counts["completed"], counts["skipped"])


def step_counts(state: RunState) -> Counter[str]:
    """Steps by status. A batched map's elements count one each, as the rows they would have had
    in the run; the one row that stands for them does not count."""
    batched = {m.row: m for m in state.maps.values()}
    counts: Counter[str] = Counter()
    for task in state.tasks.values():
        counts.update(batched[task.id].counts if task.id in batched else {task.status: 1})
    return counts


# The words of the statuses the summary's first three lines leave out, so that its counts add up.
OTHER_STEPS = {
    "not_taken": "not taken",
    "cancelled": "cancelled",
    "running": "running",
    "waiting": "waiting",
    "pending": "not run",
}


def other_steps(counts: Counter[str]) -> dict[str, int]:
    """The steps neither completed, failed nor skipped, by the word the report says them with."""
    found: Counter[str] = Counter()
    for status, n in counts.items():
        if status not in ("completed", "failed", "skipped") and n:
            found[OTHER_STEPS.get(status, status)] += n
    return dict(found)


# The rows whose agent is deployed: a task's, and a supervisor's, which is asked which node runs next.
_ASKED = ("task", "supervisor")


def summary(state: RunState) -> dict:
    tasks = list(state.tasks.values())
    counts = step_counts(state)
    total = (
        (state.ended_at - state.started_at).total_seconds()
        if state.ended_at and state.started_at
        else sum(t.duration_s for t in tasks)
    )
    return {
        "status": verdict(state),
        "partial": partial(state),
        "run_status": state.status,
        "total_steps": counts.total(),
        "completed": counts["completed"],
        "failed": counts["failed"],
        "skipped": counts["skipped"],
        "cancelled": counts["cancelled"],
        "other_steps": other_steps(counts),
        "agents": len({t.agent for t in tasks if t.status != "pending" and t.kind in _ASKED and not t.reused_from}),
        "sub_agents": sum(len(spawned) for spawned in state.spawned.values()),
        "tool_calls": tool_uses.total(state),
        "total_time_s": round(total, 3),
        "retries": sum(_retries(t) for t in tasks),
        "input_tokens": state.usage.input_tokens,
        "output_tokens": state.usage.output_tokens,
        "cost_usd": state.total_cost_usd,
        "gates": len(state.gates),
        "compensations": len(state.compensations),
        "parent": state.parent or None,
        "reused": state.reused_runs,
    }


def _first_tokens(state: RunState) -> list[str]:
    """How long agents took to start answering: each step's, or the median and slowest of many."""
    timed = [(t.id, t.first_token_s) for t in state.tasks.values() if t.first_token_s is not None]
    if not timed:
        return []
    if len(timed) <= FIRST_TOKENS_LISTED:
        return ["- Time to first token: " + ", ".join(f"{key} {_brief(s)}" for key, s in timed)]
    key, slowest = max(timed, key=lambda pair: pair[1])
    middle = statistics.median(s for _, s in timed)
    return [f"- Time to first token: median {_brief(middle)} over {len(timed)} steps, slowest {key} {_brief(slowest)}"]


def _brief(seconds: float) -> str:
    return f"{seconds:.2f}s" if seconds < 10 else _duration(seconds)


FIRST_TOKENS_LISTED = 6


def to_json(state: RunState) -> str:
    # The step log repeats the outputs for forks to take over; the report has them already.
    data = state.model_dump(mode="json", exclude={"step_log"})
    return json.dumps({"summary": summary(state), **data, "tasks": tasks_json(state)}, indent=2)


def tasks_json(state: RunState) -> list[dict]:
    """The tasks as `status --json` and `report --format json` both give them: a list, in run order."""
    # attempts_made: every try its history has (its agent call's too), as the text of `status` shows them.
    return [task.model_dump(mode="json") | {"attempts_made": task.attempts_made} for task in state.tasks.values()]


def to_markdown(state: RunState, lost: list[str] | None = None) -> str:
    """`lost`: the steps retried after a lost worker (client.retries.lost_workers), when read."""
    s = summary(state)
    lines = [
        f"# Workflow Execution Report: {state.spec}",
        "",
        "## Execution Summary",
        f"- Status: {s['status']}" + (f" (partial: {s['partial']})" if s["partial"] else ""),
        f"- Total steps: {s['total_steps']}",
        f"- Steps completed: {s['completed']}",
        f"- Steps failed: {s['failed']}",
        f"- Steps skipped: {s['skipped']}",
        *(f"- Steps {word}: {n}" for word, n in s["other_steps"].items()),
        f"- Total agents deployed: {s['agents']}" + (f" (and {s['sub_agents']} sub-agents)" if s["sub_agents"] else ""),
        f"- Total time: {_duration(s['total_time_s'])}",
        f"- Retries used: {s['retries']}",
    ]
    if s["input_tokens"] or s["output_tokens"]:
        lines.append(f"- Tokens: {s['input_tokens']} in, {s['output_tokens']} out")
    lines += _first_tokens(state) + _spending(state) + forked(state) + _workers(state) + _notes(state)
    if lost:
        lines.append(f"- Retried after a lost worker: {', '.join(lost)}")
    if state.parent_run:
        lines.append(f"- Part of run: {state.parent_run} (this run is one of its subgraphs)")
    if state.executions > 1:
        lines.append(
            f"- Temporal executions: {state.executions} (the run continued as new {state.executions - 1} "
            "time(s) to keep each history short)"
        )
    lines += [
        "",
        "## Step-by-Step Results",
        "",
        "| Step | Task | Agent | Status | Duration | Retries | Output Size |",
        "|---|---|---|---|---|---|---|",
    ]
    for n, t in enumerate(state.tasks.values(), 1):
        lines.append(
            f"| {n} | {t.id} | {t.agent} | {_status(t)} | "
            f"{_duration(t.duration_s)} | {_retries(t)} | {_size(t.output_size)} |"
        )
        lines += _sub_agent_rows(n, state.spawned.get(t.id, []))
        lines += _subgraph_rows(n, state.subgraph_runs.get(t.id, []))
    lines += ["", "## Final Output", "", state.final_output.strip() or "(none)", "", "## Issues and Warnings", ""]
    issues = [_issue("ERROR", e) for e in state.errors] + [_issue("WARNING", w) for w in state.warnings]
    lines += issues or ["- none"]
    lines += (
        _map_elements(state)
        + _human_input(state)
        + _supervision(state)
        + _sub_agents(state)
        + _tool_calls(state)
        + _compensations(state)
        + _taint(state)
    )
    lines += _blackboard(state) + _trace(state) + _graph(state)
    return "\n".join(lines) + "\n"


def _map_elements(state: RunState) -> list[str]:
    """Each batched map: its elements' counts, first failures and slowest, and where the rest are."""
    if not state.maps:
        return []
    lines = ["", "## Map Elements", ""]
    for m in state.maps.values():
        counts = ", ".join(f"{n} {status}" for status, n in sorted(m.counts.items()))
        last = f" … {batch_id(m.children, m.batches - 1)}" if m.batches > 1 else ""
        children = batch_id(m.children, 0) + last
        lines.append(
            f"- {m.key}: {m.total} elements in {m.batches} batches of {m.batch} (child workflows {children}): {counts}"
        )
        if m.slowest:
            lines.append("  - slowest: " + ", ".join(f"{n.key} {_duration(n.duration_s)}" for n in m.slowest))
        for note in m.failures:
            lines.append(f"  - {note.key} ({run_words.step_word(note.status)}): {_cell(note.error)}")
        if m.more_failures:
            lines.append(f"  - and {m.more_failures} more failed or skipped")
        lines.append(f"  - each element's row and output: `agentrun report {state.run_id} --elements {m.key} --page N`")
    return lines


def elements_markdown(page: Page) -> str:
    """A page of a map's elements, as `report --elements` prints it: a table, then their outputs."""
    lines = [
        f"# Elements of {page.map}",
        "",
        page.heading(),
        "",
        "| Element | Status | Duration | Retries | Output Size | Error |",
        "|---|---|---|---|---|---|",
    ]
    for e in page.elements:
        status = run_words.step_word(e.status)
        lines.append(
            f"| {e.key} | {status} | {_duration(e.duration_s)} | {e.retries} | {_size(e.output_size)} | {_cell(e.error)} |"
        )
    for e in page.elements:
        if e.output is not None:
            lines += ["", f"## {e.key}", "", *fenced(e.output)]
    return "\n".join(lines) + "\n"


def _workers(state: RunState) -> list[str]:
    """Which worker (pid@host) asked the agents of which steps."""
    steps: dict[str, list[str]] = {}
    for task in state.tasks.values():
        if task.worker:
            steps.setdefault(task.worker, []).append(task.id)
    if len(steps) == 1:
        return [f"- Worker: {next(iter(steps))}"]
    return ["- Workers: " + "; ".join(f"{worker} ({', '.join(ids)})" for worker, ids in steps.items())] if steps else []


def _notes(state: RunState) -> list[str]:
    """Each note people sent (`say`), and the prompt that carried it."""
    return [
        f"- Note {n.n} from {n.sender}: {n.text!r} "
        + (f"delivered to {n.delivered_to} (prompt {n.delivered_turn})" if n.delivered_to else "not delivered")
        for n in state.notes
    ]


def forked(state: RunState) -> list[str]:
    """Where a fork comes from, how many steps it took over, and what it changed."""
    if not state.parent:
        return []
    lines = [
        f"- Forked from: {state.parent} at {state.forked_at}; {state.reused_runs} step run(s) reused from "
        f"{state.parent} (not run again, no cost here)"
    ]
    return lines + ([f"- Changes: {'; '.join(state.fork_changes)}"] if state.fork_changes else [])


def _status(task: TaskState) -> str:
    status = run_words.step_word(task.status)
    return f"{status} (reused from {task.reused_from})" if task.reused_from else status


def _graph(state: RunState) -> list[str]:
    """A state graph's run: how often each node ran, its supervisors' choices, its memory at the end."""
    if not state.traits.state_graph:
        return []
    graph = next(iter(state.node_runs), None)  # the graph itself runs first: its nodes are what count
    runs = Counter({key: n for key, n in state.node_runs.items() if key != graph})
    lines = ["", "## State Graph", "", f"- Node runs: {sum(runs.values())} (" + _counts(runs) + ")"]
    for node, children in state.subgraph_runs.items():
        for child in children:
            ended = f": {_cell(child.error)}" if child.error else ""
            lines.append(
                f"- Subgraph {node} ran graph {child.graph} as run {child.run_id}: {run_words.word(child.status)}{ended}"
            )
    if state.supervisor_history:
        lines += ["", "| # | Supervisor | Chose | Reasoning |", "|---|---|---|---|"]
        lines += [
            f"| {n} | {c.supervisor_id} | {c.delegated_to} | {_cell(c.reasoning)} |"
            for n, c in enumerate(state.supervisor_history, 1)
        ]
    lines += ["", "| Memory key | Value |", "|---|---|"]
    for key, value in state.memory.items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        lines.append(f"| {_cell(key)} | {_cell(text[:MEMORY_CHARS])}{'…' if len(text) > MEMORY_CHARS else ''} |")
    return lines


def _counts(runs: Counter[str]) -> str:
    return ", ".join(f"{node} ×{count}" for node, count in runs.items()) or "none"


def _blackboard(state: RunState) -> list[str]:
    """A behaviour tree's $VAR and $CONST as the run left them."""
    if not state.traits.blackboard:
        return []
    lines = ["", "## Blackboard", "", "| Scope | Name | Value |", "|---|---|---|"]
    for scope, values in (("$VAR", state.memory), ("$CONST", state.constants)):
        for name, value in values.items():
            lines.append(f"| {scope} | {_cell(name)} | {_cell(json.dumps(value, ensure_ascii=False, default=str))} |")
    return lines


def _trace(state: RunState) -> list[str]:
    """Each answer to a behaviour tree's steps, in order."""
    if not state.trace:
        return []
    lines = [
        "",
        "## Trace",
        "",
        "| # | Time | Kind | Action | Submitted | Outcome | Note |",
        "|---|---|---|---|---|---|---|",
    ]
    for n, e in enumerate(state.trace, 1):
        lines.append(
            f"| {n} | {e.ts:%H:%M:%S} | {e.kind} | {_cell(e.name)} | {_cell(e.submitted)} | {e.outcome} | {_cell(e.note)} |"
        )
    return lines


def _spending(state: RunState) -> list[str]:
    """Summary lines on money and limits; only the ones that say something."""
    lines = []
    if state.total_cost_usd > 0:
        lines.append(f"- Cost: {dollars(state.total_cost_usd)}")
    if len(state.usage_by_model) > 1:
        per = [
            f"{model} {u.input_tokens} in, {u.output_tokens} out" + (f" ({dollars(u.cost_usd)})" if u.cost_usd else "")
            for model, u in state.usage_by_model.items()
        ]
        lines.append(f"- Tokens by model: {'; '.join(per)}")
    if state.budget:
        prompts = f", {state.iteration_count} prompts" if state.budget.iterations is not None else ""
        lines.append(
            f"- Budget: {limits_text(state.budget)} (on exceeded: {state.budget.on_exceeded}); used "
            f"{state.total_tokens_used} tokens, {dollars(state.total_cost_usd)}{prompts}"
        )
    return lines


def _human_input(state: RunState) -> list[str]:
    if not state.gates:
        return []
    lines = ["", "## Human Input", "", "| Gate | Prompt | Answer | Comment | By | When |", "|---|---|---|---|---|---|"]
    for gate in state.gates.values():
        answer = gate.answer
        if gate.status == "open":
            value, when = "(waiting)", gate.opened_at
        elif gate.status == "timed_out":
            value = "timed out" + (f": {answer.value}" if answer and answer.value is not None else "")
            when = answer.at if answer else gate.timeout_at
        else:
            value, when = (answer.value or "") if answer else "", answer.at if answer else None
        comment, by = (answer.comment, answer.by) if answer else ("", "")
        lines.append(
            f"| {_cell(gate.id)} | {_cell(gate.prompt)} | {_cell(value)} | {_cell(comment)} | {_cell(by)} | "
            f"{f'{when:%Y-%m-%d %H:%M:%S} UTC' if when else ''} |"
        )
    return lines


def _supervision(state: RunState) -> list[str]:
    """Each checkpoint goal: what it committed to, then each attempt's flags and verdicts."""
    if not state.supervision:
        return []
    lines = ["", "## Supervision", ""]
    for goal, record in state.supervision.items():
        confidence = record.pre.get("confidence")
        committed = f"; confidence {confidence}" if confidence is not None else ""
        lines.append(f"- {goal} ({record.supervision}{committed}): {_cell(str(record.pre.get('approach') or ''))}")
        for n, attempt in enumerate(record.attempts, 1):
            flags = ", ".join(attempt.flags) or "no flags"
            met = attempt.post.get("commitment_met", "")
            lines.append(f"  - attempt {n}: commitment met {met}; {flags}")
            lines += [f"    - {_verdict_line(v)}" for v in attempt.verdicts]
    return lines


def _verdict_line(verdict: Verdict) -> str:
    who = verdict.by or "no one"
    at = f" at gate {verdict.gate}" if verdict.gate else ""
    text = f"{verdict.verdict} by {who}{at}"
    if verdict.correction:
        text += f"; correction: {_cell(verdict.correction)}"
    if verdict.reason and verdict.reason != verdict.correction:
        text += f"; reason: {_cell(verdict.reason)}"
    return text


def _sub_agent_rows(step: int, spawned: list[SpawnedAgent]) -> list[str]:
    """A goal's sub-agents, as rows right under its own."""
    return [
        f"| {step}.{n} | ↳ {a.key} | {_cell(a.role)} | {_SUB_STATUS[a.status]} | - | 0 | {_size(len(a.output.encode()))} |"
        for n, a in enumerate(spawned, 1)
    ]


def _subgraph_rows(step: int, children: list[SubgraphRun]) -> list[str]:
    """A subgraph node's child runs, as rows right under its own: `report RUN` on each gives its steps."""
    return [
        f"| {step}.{n} | ↳ run {c.run_id} | graph {_cell(c.graph)} | {_RUN_STATUS.get(c.status, c.status.upper())} "
        "| - | 0 | - |"
        for n, c in enumerate(children, 1)
    ]


_RUN_STATUS = {"completed": "SUCCESS", "failed": "FAILED", "compensated": "ROLLED BACK", "running": "RUNNING"}


def _sub_agents(state: RunState) -> list[str]:
    """What each goal's sub-agents were asked, what they cost and how they ended."""
    if not state.spawned:
        return []
    lines = ["", "## Sub-agents", ""]
    for parent, spawned in state.spawned.items():
        lines.append(f"- {parent}:")
        for a in spawned:
            tokens = f"{a.usage.input_tokens} in, {a.usage.output_tokens} out"
            ended = "" if a.status == "completed" else f"; {_cell(a.output)}"
            lines.append(
                f"  - {a.key} ({_cell(a.role)}): {_SUB_STATUS[a.status]}, {tokens}; task: {_cell(a.task[:200])}{ended}"
            )
    return lines


def _tool_calls(state: RunState) -> list[str]:
    """Each step's tool calls in the order made: the tool, its arguments, how it ended (a refusal
    with the policy's reason) and how long it took."""
    if not state.tool_calls:
        return []
    lines = ["", "## Tool calls", ""]
    for key, uses in state.tool_calls.items():
        lines.append(f"- {key}: {tool_uses.counts(uses)}")
        if state.context_cut.get(key):
            lines.append(
                f"  ({state.context_cut[key]} of the oldest tool results were cut to their first characters "
                "to fit the model's context; the run keeps them whole)"
            )
        lines += [f"  {n}. {_cell(tool_uses.line(use))}" for n, use in enumerate(uses, 1)]
    return lines + _crashed_calls(state)


def _crashed_calls(state: RunState) -> list[str]:
    """The calls a crash touched, named by step and place: those that ran again after their worker
    stopped (the first attempt may have partly run) and those that could not be completed."""
    again = [
        f"{key} #{n} {u.tool}"
        for key, uses in state.tool_calls.items()
        for n, u in enumerate(uses, 1)
        if u.attempts > 1
    ]
    lost = [
        f"{key} #{n} {u.tool}"
        for key, uses in state.tool_calls.items()
        for n, u in enumerate(uses, 1)
        if u.outcome == "lost"
    ]
    lines = [f"- Ran again after a worker stopped (may have partly run twice): {', '.join(again)}"] if again else []
    return lines + ([f"- Could not be completed: {', '.join(lost)}"] if lost else [])


_SUB_STATUS = {"running": "RUNNING", "completed": "SUCCESS", "failed": "FAILED", "refused": "REFUSED"}


def _compensations(state: RunState) -> list[str]:
    if not state.compensations and (not state.compensation_stack or state.status == "completed"):
        return []
    lines = ["", "## Compensations", ""]
    # In the order they ran: last-in first-out from the stack.
    for n, result in enumerate(state.compensations, 1):
        error = f": {result.error}" if result.error else ""
        lines.append(f"{n}. {result.action_id}: {result.status.upper()}{error}")
    if state.compensation_stack and state.status != "completed":  # a run that completed needs no undo
        top_first = [entry.action_id for entry in reversed(state.compensation_stack)]
        lines.append(f"- Still on the stack (not run), next first: {', '.join(top_first)}")
    return lines


# What the table is, said where it is shown (docs/concepts.md says more).
TAINT_NOTE = (
    "Values that came from outside the run (a provider call, an agent with tools), and the outputs made from"
    " them: data no one checked, which a condition of a graph with `strict_taint` reads as false."
)


def _taint(state: RunState) -> list[str]:
    if not state.taint:
        return []
    lines = ["", "## Tainted Data", "", TAINT_NOTE, "", "| Key | Source | Derived from |", "|---|---|---|"]
    for key, mark in state.taint.items():
        lines.append(f"| {_cell(key)} | {_cell(mark.source)} | {_cell(', '.join(mark.derived_from))} |")
    return lines


def _issue(kind: str, text: str) -> str:
    """A list item that keeps a many-line message whole (a check's output, its traceback), line by line."""
    first, _, rest = text.strip().partition("\n")
    if not rest.strip():
        return f"- {kind} {first}"
    block = "\n".join(f"  {line}".rstrip() for line in rest.splitlines())
    return f"- {kind} {first}\n  ```\n{block}\n  ```"


def _cell(text: str) -> str:
    """Text that stays inside one markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def _retries(task: TaskState) -> int:
    return task.retries_used


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes}m {secs}s"


def _size(size: int) -> str:
    return f"{size / 1024:.1f}KB" if size >= 1024 else f"{size}B"
