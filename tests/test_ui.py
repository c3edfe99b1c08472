"""`client ui` in a real headless Chromium (Debian's `chromium`, driven by Playwright pointed at it):
the inbox answers runs' gates through the same updates as the CLI, a second answer is refused with
the first, the token is required when set, and an answer given after a worker's kill -9 is taken once.

One Temporal dev server, one page server (with AGENTRUN_UI_TOKEN set), one browser and one fake LLM
serve every case; each case starts its own runs on the module's worker queue, served by a real
worker process.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from tests.conftest import ROOT, dev_server, run_id, sigkill, start_worker, wait_for, write_spec
from tests.specs import SHED

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium installed (apt-get install chromium)")

TOKEN = "page-token-for-tests"
WEB = "http://temporal-web.example:8233"
DONE = "done\nCOMPLETION_STATUS: COMPLETE"
BUDGET = """\
name: thrift
budget: {tokens: 30, on_exceeded: pause}
subtasks:
  one: {instructions: "Write the first part."}
  two: {instructions: "Write the second part."}
"""
# `AGENTRUN_UI_SCREENSHOT=docs/images/inbox.png pytest tests/test_ui.py` refreshes the docs site's picture
# (so does `python docs/screenshots.py`, with the Temporal Web one).
SCREENSHOT = os.environ.get("AGENTRUN_UI_SCREENSHOT")


@pytest.fixture(scope="module")
def llm() -> Iterator:
    from tests.fakes.openai_server import FakeOpenAI

    with FakeOpenAI(api_key="sk-test") as server:
        server.reply = _first_line
        yield server


def _first_line(messages) -> str:
    return f"{messages[-1]['content'].splitlines()[0]} — {DONE}"


@pytest.fixture(scope="module")
def agents_env(llm) -> dict[str, str]:
    return {"OPENAI_BASE_URL": llm.url, "OPENAI_API_KEY": "sk-test"}


@pytest.fixture(scope="module")
def queue(address, agents_env) -> Iterator[str]:
    name = run_id("ui-q")
    proc = start_worker(address, "--task-queue", name, env=agents_env)
    yield name
    proc.terminate()
    proc.wait(timeout=30)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def own_server(blob_folder) -> AsyncIterator:
    """A server of this module's own: the inbox lists every waiting run on its server, and the
    session's holds the waiting runs other tests left, each of which the page would ask each second."""
    environment = await dev_server()
    yield environment
    await environment.shutdown()


@pytest.fixture(scope="module")
def address(own_server) -> str:
    return own_server.client.service_client.config.target_host


@pytest.fixture(scope="module")
def page_url(address, tmp_path_factory) -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    environ = {**os.environ, "TEMPORAL_ADDRESS": address, "AGENTRUN_UI_TOKEN": TOKEN, "TEMPORAL_UI_URL": WEB}
    environ.pop("TEMPORAL_PROFILE", None)
    proc = subprocess.Popen(
        [sys.executable, "-u", "-m", "agentrun.client", "ui", "--port", str(port)],
        env=environ,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=open(tmp_path_factory.mktemp("ui") / "ui.log", "wb"),
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith(f"inbox at http://127.0.0.1:{port}/"), "the page server did not start"
    yield f"http://127.0.0.1:{port}"
    proc.send_signal(signal.SIGINT)  # Ctrl-C stops it as it stops any command
    assert proc.wait(timeout=30) == 130


@pytest.fixture(scope="module")
def browser() -> Iterator:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM)
        yield chromium
        chromium.close()


@pytest.fixture
def person(browser, page_url):
    """A new browser window (its own cookies) that has presented the token once."""
    contexts = []

    def open_as() -> object:
        context = browser.new_context(viewport={"width": 1100, "height": 900})
        contexts.append(context)
        page = context.new_page()
        page.goto(f"{page_url}/?token={TOKEN}")
        return page

    yield open_as
    for context in contexts:
        context.close()


def _start(cli, tmp_path: Path, queue: str, text: str, prefix: str) -> str:
    rid = run_id(prefix)
    spec = write_spec(tmp_path, text, f"{prefix}.yaml")
    result = cli("start", str(spec), "--agent", "openai:worker", "--id", rid, "--task-queue", queue, "--detach")
    assert result.code == 0, result.err
    return rid


def _card(page, page_url: str, rid: str, gate: str):
    """The inbox's card of gate `gate` of run `rid`, once the inbox lists it."""
    card = page.locator(f'.gate[data-key="{rid}/{gate}"]')

    def listed() -> bool:
        page.goto(f"{page_url}/")
        return card.count() == 1

    wait_for(listed, timeout_s=60, poll_s=0.3)
    return card


def test_the_token_is_asked_for_then_kept_in_a_cookie(page_url, browser):
    assert httpx.get(f"{page_url}/").status_code == 401
    assert httpx.get(f"{page_url}/", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert httpx.get(f"{page_url}/", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    context = browser.new_context()
    try:
        page = context.new_page()
        refused = page.goto(f"{page_url}/runs")
        assert refused is not None and refused.status == 401
        assert "AGENTRUN_UI_TOKEN" in page.inner_text("body")
        page.goto(f"{page_url}/runs?token={TOKEN}")
        assert page.url == f"{page_url}/runs"  # the token is not left in the address bar
        assert page.locator("h2").inner_text() == "Runs"
        again = page.goto(f"{page_url}/")
        assert again is not None and again.status == 200
    finally:
        context.close()


def test_answer_by_choice_and_approve_with_a_comment_then_the_run_completes(
    cli, queue, llm, person, page_url, tmp_path
):
    rid = _start(cli, tmp_path, queue, SHED, "shed")
    page = person()
    card = _card(page, page_url, rid, "colour")
    assert card.locator(".prompt").inner_text() == "Which colour for the shed?"
    assert card.locator("select[name=value] option").all_inner_texts() == ["red", "blue"]
    card.locator("input[name=by]").fill("ada")
    card.locator("select[name=value]").select_option("red")
    card.locator("button[value=answer]").click()
    assert page.locator("#said").inner_text() == f"run {rid}: gate colour answered: red"

    card = _card(page, page_url, rid, "ship")
    assert card.locator(".kind").inner_text().lower() == "approval"
    assert card.locator("input[name=by]").input_value() == "ada"  # remembered by this browser
    card.locator("input[name=comment]").fill("looks good")
    if SCREENSHOT:
        box = page.locator("#questions").bounding_box() or {"y": 0, "height": 600}
        page.screenshot(
            path=str(ROOT / SCREENSHOT), clip={"x": 0, "y": 0, "width": 1100, "height": box["y"] + box["height"] + 16}
        )
    drip = llm.drip("worker")  # the shipping step's reply comes a word at a time, when let out
    try:
        card.locator("button[value=approve]").click()
        assert page.locator("#said").inner_text() == f"run {rid}: gate ship answered: approve"
        page.goto(f"{page_url}/runs/{rid}")
        # The running step's reply so far, from its heartbeat, as the page's events bring it.
        page.locator("#live", has_text="writing: 5 characters").wait_for(timeout=60_000)
        assert '"…Ship"' in page.locator("#live").inner_text()
        drip.allow(2)  # "the ", "shed. ": the open page shows them without a reload
        page.locator("#live", has_text='"…Ship the shed."').wait_for(timeout=60_000)
    finally:
        drip.allow_all()
    assert page.locator("#temporal-web").get_attribute("href") == f"{WEB}/namespaces/default/workflows/{rid}"
    page.locator("#plan svg").wait_for(timeout=30_000)
    drawn = page.locator("#plan svg").text_content() or ""
    assert "colour" in drawn and "ship" in drawn
    # The page follows the run by its events and shows the report once it has ended.
    page.locator("#status", has_text="COMPLETE").wait_for(timeout=60_000)
    report = page.locator("#report")
    assert report.locator("li", has_text="Status:").first.inner_text() == "Status: COMPLETE"
    for answered in (
        ["colour", "Which colour for the shed?", "red", "", "ada"],
        ["ship", "Approve 'ship'?", "approve", "looks good", "ada"],
    ):
        assert report.locator("tr", has_text=answered[1]).locator("td").all_inner_texts()[:5] == answered
    assert page.locator('#live tr.step[data-step="paint"] td.word').inner_text() == "SUCCESS"
    assert [p.splitlines()[0] for p in llm.prompts_for("worker")[-2:]] == ["Paint the shed red.", "Ship the shed."]
    reported = cli("report", rid)
    assert "| ship | Approve 'ship'? | approve | looks good | ada |" in reported.out

    page.goto(f"{page_url}/runs?status=completed&spec=shed")
    assert page.locator(f"#runs a[href='/runs/{rid}']").count() == 1
    page.goto(f"{page_url}/runs?status=failed&spec=shed")
    assert page.locator(f"#runs a[href='/runs/{rid}']").count() == 0
    page.goto(f"{page_url}/runs?limit=0")
    assert page.locator("#refused").inner_text() == "limit '0' is not a whole number above 0"


def test_a_second_browser_is_refused_with_the_first_answer(cli, queue, person, page_url, tmp_path):
    rid = _start(cli, tmp_path, queue, SHED, "shed")
    first, second = person(), person()
    mine, theirs = _card(first, page_url, rid, "colour"), _card(second, page_url, rid, "colour")
    mine.locator("input[name=by]").fill("ada")
    mine.locator("select[name=value]").select_option("red")
    mine.locator("button[value=answer]").click()
    assert first.locator("#said").inner_text() == f"run {rid}: gate colour answered: red"
    # The second window's events mark the gate as answered elsewhere; its form still sends.
    theirs.locator(".note").wait_for(state="visible", timeout=30_000)
    theirs.locator("input[name=by]").fill("bob")
    theirs.locator("select[name=value]").select_option("blue")
    with second.expect_response(lambda r: r.url.endswith("/answer")) as sent:
        theirs.locator("button[value=answer]").click()
    assert sent.value.status == 409
    refusal = second.locator("#refused").inner_text()
    assert refusal.startswith(f"run {rid}, gate colour: gate 'colour' was already answered (red) by ada at ")
    assert cli("approve", rid, "--as", "carol").code == 0
    assert cli("watch", rid).code == 0
    assert "| ship | Approve 'ship'? | approve |  | carol |" in cli("report", rid).out


def test_a_paused_budget_is_raised_on_the_page(cli, queue, llm, person, page_url, tmp_path):
    llm.reply = lambda messages: " ".join(["word"] * 40) + "\n" + DONE
    try:
        rid = _start(cli, tmp_path, queue, BUDGET, "thrift")
        page = person()
        card = _card(page, page_url, rid, "budget")
        assert "30" in card.locator(".prompt").inner_text()
        assert card.locator(".spent").inner_text().startswith("used ")
        card.locator("input[name=by]").fill("ada")
        card.locator("input[name=tokens]").fill("10")
        card.locator("button[value=budget]").click()
        assert "is not above the" in page.locator("#refused").inner_text()
        card = _card(page, page_url, rid, "budget")
        card.locator("input[name=by]").fill("ada")
        card.locator("input[name=tokens]").fill("100000")
        card.locator("input[name=comment]").fill("worth it")
        card.locator("button[value=budget]").click()
        assert page.locator("#said").inner_text() == f"run {rid}: budget budget raised to 100000 tokens"
        watched = cli("watch", rid)
        assert watched.code == 0, watched.out
        assert "- Budget: 100000 tokens (on exceeded: pause); used" in watched.out
    finally:
        llm.reply = _first_line


def test_an_answer_given_after_the_worker_was_killed_is_taken_once(
    cli, address, agents_env, llm, person, page_url, tmp_path
):
    own = run_id("ui-kill")
    worker = start_worker(address, "--task-queue", own, env=agents_env)
    rid = _start(cli, tmp_path, own, SHED, "shed")
    page = person()
    card = _card(page, page_url, rid, "colour")
    sigkill(worker)
    worker = start_worker(address, "--task-queue", own, env=agents_env)
    try:
        card.locator("input[name=by]").fill("ada")
        card.locator("select[name=value]").select_option("blue")
        card.locator("button[value=answer]").click()
        assert page.locator("#said").inner_text() == f"run {rid}: gate colour answered: blue"
        assert cli("approve", rid, "--gate", "ship").code == 0
        assert cli("watch", rid).code == 0
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    painted = [p.splitlines()[0] for p in llm.prompts_for("worker") if p.startswith("Paint the shed")]
    assert painted.count("Paint the shed blue.") == 1
    assert _accepted_updates(address, rid) == 2  # the colour, then the approval: each once


def _accepted_updates(address: str, rid: str) -> int:
    """How many updates the run's history took, read with a client of its own (this test runs no event loop)."""
    from temporalio.api.enums.v1 import EventType
    from temporalio.client import Client

    async def count() -> int:
        client = await Client.connect(address)
        events = [e async for e in client.get_workflow_handle(rid).fetch_history_events()]
        return sum(e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED for e in events)

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, count()).result()


def test_a_taken_port_is_one_error(cli, page_url):
    """(A bind beyond loopback, refused without a token, is in test_ui_guard.py.)"""
    taken = cli("ui", "--port", page_url.rsplit(":", 1)[1], timeout=60)
    assert taken.code == 2 and taken.out == ""
    assert (
        f"error: cannot listen on 127.0.0.1:{page_url.rsplit(':', 1)[1]}\n  hint: choose another with --port N"
        in taken.err
    )


def test_a_supervisors_concern_is_shown_and_a_correction_sent(cli, queue, llm, person, page_url, tmp_path):
    from tests.test_agentfile_restart import AGENTFILE, CORRECTION, GATE, _builder

    llm.by_model["builder"] = _builder
    llm.by_model["supervisor"] = json.dumps({"verdict": "PAUSE", "correction": "", "reason": "which branch?"})
    rid = run_id("release")
    spec = write_spec(tmp_path, AGENTFILE, "Agentfile")
    agents = ["--agent", "openai:builder", "--agent", "supervisor=openai:supervisor"]
    assert cli("start", str(spec), *agents, "--id", rid, "--task-queue", queue, "--detach").code == 0
    page = person()
    card = _card(page, page_url, rid, GATE)
    assert "the supervisor says PAUSE (which branch?)" in card.locator(".prompt").inner_text()
    assert "built from main" in card.locator(".prompt").inner_text()
    card.locator("input[name=by]").fill("ada")
    card.locator("input[name=value]").fill(CORRECTION)
    card.locator("button[value=answer]").click()
    assert page.locator("#said").inner_text() == f"run {rid}: gate {GATE} answered: {CORRECTION}"
    assert cli("watch", rid).code == 0
    assert sum(CORRECTION in p for p in llm.prompts_for("builder")) == 1


def test_a_note_sent_from_a_run_page_reaches_its_steps_next_prompt(cli, queue, llm, person, page_url, tmp_path):
    rid = _start(cli, tmp_path, queue, SHED, "shed")
    page = person()
    _card(page, page_url, rid, "colour")  # the run waits for a person before its first prompt
    page.goto(f"{page_url}/runs/{rid}")
    note = page.locator("#say")
    note.locator("input[name=by]").fill("ada")
    note.locator("input[name=step]").fill("nope")
    note.locator("input[name=text]").fill("Use oil paint.")
    with page.expect_response(lambda r: r.url.endswith("/say")) as sent:
        note.locator("button").click()
    assert sent.value.status == 409
    assert page.locator("#refused").inner_text().startswith("the note was not taken: ")
    assert "nope" in page.locator("#refused").inner_text()

    note = page.locator("#say")
    note.locator("input[name=step]").fill("paint")
    note.locator("input[name=text]").fill("Use oil paint.")
    note.locator("button").click()
    assert page.locator("#said").inner_text() == "note 1 from ada is for step paint's next prompt"
    assert cli("answer", rid, "--gate", "colour", "red").code == 0
    assert cli("approve", rid).code == 0
    assert cli("watch", rid).code == 0
    [paint] = [p for p in llm.prompts_for("worker") if p.startswith("Paint the shed red.")][-1:]
    assert paint.count("Use oil paint.") == 1
    assert "ada" in paint


MIGRATE = """\
workflow:
  name: migrator
  policy: migrate-policy.toml
  agents:
    writer:
      prompt: "Add an email column to the users table's migration."
      tools: [Write]
  steps:
    - id: migrate
      agent: writer
"""
OLD_MIGRATION = "CREATE TABLE users (\n  id INTEGER PRIMARY KEY\n);\n"
NEW_MIGRATION = "CREATE TABLE users (\n  id INTEGER PRIMARY KEY,\n  email TEXT\n);\n"


def test_a_tool_call_waits_on_a_card_that_draws_its_diff_and_runs_once_approved(
    cli, queue, llm, person, page_url, tmp_path
):
    from tests.fakes.openai_server import ToolUse

    def writer(messages):
        if "users table's migration" not in str(messages[0]["content"]) + str(messages[-1]["content"]):
            return _first_line(messages)
        if messages[-1]["role"] == "tool":
            return f"wrote it ({messages[-1]['content']})"
        return ToolUse("write", {"path": "migrations/0001_users.sql", "content": NEW_MIGRATION}, text="Adding email.")

    (tmp_path / "migrate-policy.toml").write_text('[write]\nask = ["migrations/**"]\n')
    (tmp_path / "migrations").mkdir()
    (tmp_path / "migrations" / "0001_users.sql").write_text(OLD_MIGRATION)
    llm.reply = writer
    try:
        rid = run_id("migrate")
        spec = write_spec(tmp_path, MIGRATE, "migrate.yaml")
        started = cli(
            "start", str(spec), "--agent", "openai:writer", "--id", rid, "--task-queue", queue,
            "--workdir", str(tmp_path), "--detach",
        )  # fmt: skip
        assert started.code == 0, started.err
        page = person()
        card = _card(page, page_url, rid, "migrate.write")
        assert card.locator(".tool").inner_text() == "write" and card.locator(".step").inner_text() == "migrate"
        assert card.locator(".words").inner_text() == "Adding email."
        assert json.loads(card.locator(".arguments").inner_text())["path"] == "migrations/0001_users.sql"
        # The diff against the file as it is now, each changed line drawn as added or removed.
        assert card.locator(".diff .del").all_inner_texts() == ["-  id INTEGER PRIMARY KEY"]
        assert card.locator(".diff .add").all_inner_texts() == ["+  id INTEGER PRIMARY KEY,", "+  email TEXT"]
        assert (tmp_path / "migrations" / "0001_users.sql").read_text() == OLD_MIGRATION  # not written yet
        pending = cli("pending")
        assert "migrate.write" in pending.out and "run write" in pending.out
        card.locator("input[name=by]").fill("ada")
        card.locator("button[value=approve]").click()
        assert page.locator("#said").inner_text() == f"run {rid}: gate migrate.write answered: approve"
        wait_for(lambda: json.loads(cli("status", rid, "--json").out)["status"] == "completed", timeout_s=60)
    finally:
        llm.reply = _first_line
    assert (tmp_path / "migrations" / "0001_users.sql").read_text() == NEW_MIGRATION
