"""A run's page in a real headless Chromium: the plan drawn by Mermaid with each step's state, kept
up to date by the page's events; the steps as a table with time, worker and a link to each output;
the report as HTML (tables, no markdown pipes, an agent's or a person's HTML shown as text); the run
called by the same word as `status`, `list` and the report; the runs list filtered by status and spec.

The page server, worker, fake LLM and browser are tests/test_ui.py's fixtures, on a dev server of
this module's own."""

from __future__ import annotations

import os
import re

import pytest

from agentrun.explain.flowchart import flowchart
from agentrun.lang.dialects import DIALECTS
from agentrun.lang.load import load
from tests.conftest import ROOT
from tests.specs import SHED
from tests.test_ui import (  # noqa: F401  # fixtures this module uses
    CHROMIUM,
    _card,
    _start,
    address,
    agents_env,
    browser,
    llm,
    own_server,
    page_url,
    person,
    queue,
)

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium installed (apt-get install chromium)")

# What a person's comment (or an agent's output) might carry into the report: each would set
# window.pwned or add an element #injected if the page rendered it as HTML.
ATTACKS = [
    '<img id="injected" src="x" onerror="window.pwned=1">',
    "<script>window.pwned=1</script>",
    '<svg id="injected" onload="window.pwned=1"></svg>',
    "[click](javascript:window.pwned=1)",
    '<a id="injected" href="javascript:window.pwned=1">x</a>',
]
INJECTED = " ".join(ATTACKS)
# `AGENTRUN_RUN_PAGE_SCREENSHOT=docs/images/run-page.png pytest tests/test_run_page.py` refreshes the docs' picture.
SCREENSHOT = os.environ.get("AGENTRUN_RUN_PAGE_SCREENSHOT")


def test_the_plan_steps_and_report_are_drawn_and_follow_the_run(cli, queue, person, page_url, tmp_path):  # noqa: F811
    rid = _start(cli, tmp_path, queue, SHED, "shed")
    page = person()
    _card(page, page_url, rid, "colour")  # the run waits for a person
    page.goto(f"{page_url}/runs/{rid}")

    # One word for the run: the page's badge, `status`, `list` and the report.
    assert page.locator("#status").inner_text() == "WAITING"
    assert cli("status", rid).out.startswith(f"{rid}: WAITING for ")
    listed = [line.split() for line in cli("list", "--spec", "shed", "--status", "waiting").out.splitlines()]
    assert [cells[1] for cells in listed if cells[0] == rid] == ["WAITING"]
    assert page.locator("#report li", has_text="Status:").first.inner_text() == "Status: WAITING"

    # The plan as Mermaid's SVG, the step that waits for a person marked as waiting.
    waiting = page.locator("#plan svg g.node.waiting")
    waiting.first.wait_for(timeout=30_000)
    assert waiting.count() == 1 and "colour" in (waiting.text_content() or "")

    # An answer given elsewhere: the open page's events redraw the plan and the steps, no reload.
    assert cli("answer", rid, "--gate", "colour", "red").code == 0
    page.locator("#plan svg g.node.completed", has_text="colour").wait_for(timeout=60_000)
    page.locator("#plan svg g.node.waiting", has_text="ship").wait_for(timeout=60_000)
    page.locator('#live tr.step[data-step="paint"] td.word', has_text="SUCCESS").wait_for(timeout=60_000)

    # The approval's comment is a person's text: it reaches the report as text, never as HTML.
    assert cli("approve", rid, "--comment", INJECTED, "--as", "ada").code == 0
    page.locator("#status", has_text="COMPLETE").wait_for(timeout=60_000)  # the page reloads once it ends
    page.locator("#plan svg").wait_for(timeout=30_000)
    assert page.locator("#plan svg g.node.completed").count() == 3
    assert page.locator("#plan svg g.node.waiting").count() == 0

    report = page.locator("#report")
    assert report.locator("table").count() >= 2  # the steps and the human input, drawn as tables
    text = report.inner_text()
    assert not [line for line in text.splitlines() if line.lstrip().startswith("|")]  # no markdown pipes
    assert report.locator("td", has_text="Which colour for the shed?").count() == 1
    assert page.locator("#injected").count() == 0 and page.evaluate("window.pwned") is None
    assert report.locator("a[href^='javascript']").count() == 0
    assert all(attack in text for attack in ATTACKS if not attack.startswith("[")) and "[click](javascript:" in text
    assert report.locator("li", has_text="Status:").first.inner_text() == "Status: COMPLETE"
    assert "- Status: COMPLETE" in cli("report", rid).out

    # Each step's row: its word, when it started, how long, which worker, a link to its output.
    paint = page.locator('#live tr.step[data-step="paint"]')
    key, agent, word, started, took, worker, output = paint.locator("td").all_inner_texts()
    assert (key, word, output) == ("paint", "SUCCESS", "output")
    assert re.fullmatch(r"\d\d:\d\d:\d\d", started) and took.endswith("s") and "@" in worker
    if SCREENSHOT:
        page.screenshot(path=str(ROOT / SCREENSHOT), full_page=True)
    paint.locator("a").click()
    assert page.locator("#output").inner_text().startswith("Paint the shed red.")
    assert page.locator("#step-status").inner_text() == "SUCCESS"


def test_a_running_steps_reply_so_far_is_one_click_away(cli, queue, llm, person, page_url, tmp_path):  # noqa: F811
    rid = _start(cli, tmp_path, queue, SHED, "shed")
    page = person()
    _card(page, page_url, rid, "colour")
    drip = llm.drip("worker")  # paint's reply comes a word at a time, when let out
    try:
        assert cli("answer", rid, "--gate", "colour", "blue").code == 0
        page.goto(f"{page_url}/runs/{rid}")
        link = page.locator('#live tr.step[data-step="paint"] a', has_text="so far")
        link.wait_for(timeout=60_000)  # the steps' table follows the run: the link comes with the first heartbeat
        link.click()
        assert page.locator("#step-status").inner_text() == "RUNNING"
        # Its first heartbeat may come before the first word ("waiting: 0 characters"): the page looks again.
        page.locator("#so-far", has_text="writing: ").wait_for(timeout=30_000)
        page.locator("#output", has_text="…Paint").wait_for(timeout=30_000)  # the page reloads itself: wait, not read
        drip.allow(2)  # "the ", "shed ": the step's page looks again by itself
        page.locator("#output", has_text="…Paint the shed").wait_for(timeout=30_000)
    finally:
        drip.allow_all()
    assert cli("approve", rid).code == 0 and cli("watch", rid).code == 0
    page.reload()
    assert page.locator("#step-status").inner_text() == "SUCCESS"
    assert page.locator("#output").inner_text().startswith("Paint the shed blue.")


def test_the_runs_list_is_filtered_by_status_and_spec(cli, queue, person, page_url, tmp_path):  # noqa: F811
    rid = _start(cli, tmp_path, queue, SHED.replace("name: shed", "name: filtered"), "filtered")
    page = person()
    _card(page, page_url, rid, "colour")
    page.goto(f"{page_url}/runs")
    form = page.locator("form[action='/runs']")
    form.locator("select[name=status]").select_option(label="waiting")
    form.locator("input[name=spec]").fill("filtered")
    form.locator("button").click()
    assert page.url.endswith("/runs?status=waiting&spec=filtered&limit=50")
    rows = page.locator("#runs tr", has=page.locator("a"))
    assert rows.count() == 1 and rows.locator("a").inner_text() == rid
    assert rows.locator(".status").inner_text() == "WAITING"  # as `status` and `list` say

    form = page.locator("form[action='/runs']")
    form.locator("select[name=status]").select_option(label="complete")
    form.locator("button").click()
    assert page.locator("#runs a").count() == 0 and "No runs match." in page.inner_text("body")
    form = page.locator("form[action='/runs']")
    form.locator("select[name=status]").select_option(label="any status")
    form.locator("input[name=spec]").fill("shed-of-no-one")
    form.locator("button").click()
    assert page.locator("#runs a").count() == 0


def test_every_examples_plan_is_a_flowchart_mermaid_draws(page_url, browser):  # noqa: F811
    """`inspect --format mermaid` and the run page draw any plan: Mermaid itself (the page's copy)
    parses and draws each example's flowchart."""
    specs = sorted({path for d in DIALECTS for pattern in d.EXAMPLES for path in (ROOT / "examples").glob(pattern)})
    charts = {str(path.relative_to(ROOT)): flowchart(load(str(path))) for path in specs}
    assert len(charts) >= 10
    # The page's own script, put on a blank page: its CSP is not what is tested here.
    context = browser.new_context(bypass_csp=True)
    try:
        page = context.new_page()
        page.add_script_tag(path=str(ROOT / "agentrun" / "ui" / "static" / "mermaid.min.js"))
        drawn = page.evaluate(
            """async (charts) => {
                mermaid.initialize({ startOnLoad: false, securityLevel: "strict", flowchart: { htmlLabels: false } });
                const out = {};
                let n = 0;
                for (const [name, chart] of Object.entries(charts)) {
                    try {
                        const { svg } = await mermaid.render("chart" + n++, chart);
                        out[name] = (svg.match(/class="node /g) || []).length;
                    } catch (error) {
                        out[name] = String(error);
                    }
                }
                return out;
            }""",
            charts,
        )
    finally:
        context.close()
    # Each node the chart defines is a node of the drawing (Mermaid dropped none and failed on none).
    boxes = {name: len(re.findall(r"^    \w+[\[{(]", chart, re.MULTILINE)) for name, chart in charts.items()}
    assert drawn == boxes
