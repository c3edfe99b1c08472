"""The Starlette app behind `client ui`: the inbox, the runs, a run's page, the answers and notes
posted from them, and the server-sent events that keep an open page up to date.

Answers go through client.humans, as `answer`, `approve`, `reject` and `budget` send them: the run's
update validators take or refuse them, so a second answer to a gate is refused with the first one.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, cast, get_args

import jinja2
from starlette.applications import Starlette
from starlette.datastructures import FormData
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from agentrun.client.engine import Engine
from agentrun.errors import Refused, Unavailable, UsageError, UserError
from agentrun.ids import GateId
from agentrun.lang.ir import APPROVE, REJECT
from agentrun.models import run_words
from agentrun.models.contract import NoteInput, limits_text
from agentrun.models.names import RunStatus
from agentrun.ui import guard, pages
from agentrun.ui.guard import Guard
from agentrun.ui.shared import Shared

WAIT_S = 30.0  # how long an answer waits for a worker to hold its run, as `answer --wait 30`
TICK_S = 1.0  # how often an open page's events look again
LIST_LIMIT = 50

TEMPLATES = jinja2.Environment(loader=jinja2.PackageLoader("agentrun.ui", "templates"), autoescape=True)
# Every <script> of the pages carries `nonce="{{ nonce() }}"`, this response's own (agentrun.ui.guard),
# and every form `{{ csrf_field() }}`.
TEMPLATES.globals.update(nonce=guard.nonce, csrf_field=guard.csrf_field, signed_in=guard.signed_in)
TEMPLATES.globals["run_word"] = run_words.word  # a run's status as `status`, `list` and the report word it


def build(engine: Engine, token: str | None, hosts: frozenset[str], tls: bool = False) -> Starlette:
    """The app, answering with `engine`, for requests naming one of `hosts` (guard.allowed_hosts);
    every request must carry `token` when one is given (agentrun.ui.guard)."""
    app = Starlette(
        routes=[
            Route("/", _inbox),
            Route("/inbox/events", _inbox_events),
            Route("/answer", _answer, methods=["POST"]),
            Route("/runs", _runs),
            # A run id may hold '/': the run's own routes are matched first by their last parts.
            Route("/runs/{run_id:path}/events", _run_events),
            Route("/runs/{run_id:path}/say", _say, methods=["POST"]),
            Route("/runs/{run_id:path}/steps/{step}", _step),
            Route("/runs/{run_id:path}", _run),
            # The page's scripts (Mermaid, which draws the plan) come from the package: no CDN.
            Mount("/static", StaticFiles(packages=[("agentrun.ui", "static")]), name="static"),
        ],
        middleware=[Middleware(Guard, hosts=hosts, token=token, tls=tls)],
    )
    app.state.engine = engine
    app.state.shared = Shared(max_age_s=TICK_S / 2)
    return app


def _page(name: str, status_code: int = 200, **values: Any) -> HTMLResponse:
    return HTMLResponse(TEMPLATES.get_template(name).render(**values), status_code=status_code)


def _engine(request: Request) -> Engine:
    return request.app.state.engine


def _shared(request: Request) -> Shared:
    """What the open pages' event streams read: one look per half tick for all of them."""
    return request.app.state.shared


async def _inbox(request: Request, said: str = "", refused: str = "", status_code: int = 200) -> Response:
    found = await pages.inbox(_engine(request))
    return _page("inbox.html", status_code, questions=found.questions, more=found.more, said=said, refused=refused)


async def _runs(request: Request) -> Response:
    """`list` with its filters: ?status=S&spec=NAME&limit=N."""
    status, spec = request.query_params.get("status") or None, request.query_params.get("spec") or None
    statuses = list(get_args(RunStatus))
    shown = {"status": status, "spec": spec, "statuses": statuses}
    try:
        if status is not None and status not in statuses:
            raise UsageError(f"status '{status}' is none of {', '.join(statuses)}")
        limit = _positive(request.query_params.get("limit") or str(LIST_LIMIT), "limit")
        rows = await pages.runs(_engine(request), cast(RunStatus | None, status), spec, limit)
    except UserError as exc:
        return _page("runs.html", 400, rows=[], limit=LIST_LIMIT, refused=str(exc), **shown)
    return _page("runs.html", rows=rows, limit=limit, **shown)


def _positive(text: str, name: str) -> int:
    if not text.isdecimal() or not text.isascii() or int(text) <= 0:  # '²' is a digit int() cannot read
        raise UsageError(f"{name} '{text}' is not a whole number above 0")
    return int(text)


async def _run(request: Request, said: str = "", refused: str = "", status_code: int = 200) -> Response:
    try:
        page = await pages.run_page(_engine(request), request.path_params["run_id"])
    except UserError as exc:
        return _page("missing.html", 404, refused=str(exc))
    return _page("run.html", status_code, page=page, said=said, refused=refused)


async def _step(request: Request) -> Response:
    """One step's output, or what its agent has written so far."""
    run_id, key = request.path_params["run_id"], request.path_params["step"]
    try:
        page = await pages.step_page(_engine(request), run_id, key)
    except UserError as exc:
        return _page("missing.html", 404, refused=str(exc))
    return _page("step.html", page=page)


async def _say(request: Request) -> Response:
    """A note for the run's agents from its page, through the `say` update as `client say` sends
    it; the run's page again, saying what became of it (409 when the run refused it)."""
    form = await request.form()
    run_id = request.path_params["run_id"]
    given = NoteInput(
        text=str(form.get("text", "")).strip(),
        step=str(form.get("step", "")).strip(),
        by=str(form.get("by", "")).strip(),
    )
    try:
        note = await _engine(request).run(run_id).say(given.text, given.step, given.by, WAIT_S)
    except UserError as exc:
        return await _run(request, refused=f"the note was not taken: {exc}", status_code=_code(exc))
    where = f"step {note.step}'s next prompt" if note.step else "the next prompt"
    return await _run(request, said=f"note {note.n} from {note.by} is for {where}")


def _code(exc: UserError) -> int:
    """409 when the run refused it, 503 when no worker took it, 400 for anything else."""
    return 409 if isinstance(exc, Refused) else 503 if isinstance(exc, Unavailable) else 400


async def _answer(request: Request) -> Response:
    """An answer, approval, rejection or budget raise from a gate's form; the inbox again, saying
    what became of it (409 when the run refused it, 503 when no worker took it, 400 for a form it
    cannot be made of or a run that cannot take answers)."""
    form = await request.form()
    run_id, gate = str(form.get("run_id", "")), str(form.get("gate", ""))
    try:
        said = await _send(_engine(request), form, run_id, GateId(gate))
    except UserError as exc:
        return await _inbox(request, refused=f"run {run_id}, gate {gate}: {exc}", status_code=_code(exc))
    return await _inbox(request, said=f"run {run_id}: {said}")


async def _send(engine: Engine, form: FormData, run_id: str, gate: GateId) -> str:
    action, by, comment = str(form.get("action", "")), str(form.get("by", "")).strip(), str(form.get("comment", ""))
    if action == "budget":
        raised = await engine.run(run_id).raise_budget(
            gate,
            tokens=_number(form, "tokens", int),
            usd=_number(form, "usd", float),
            iterations=_number(form, "iterations", int),
            comment=comment,
            by=by,
            wait_s=WAIT_S,
        )
        return f"budget {raised.gate} raised to {limits_text(raised.budget)}"
    digest = str(form.get("digest", ""))
    if digest:  # a tool call's gate: the answer holds only for the arguments the card showed
        run = engine.run(run_id)
        if action == "reject":
            answer = await run.reject(gate, comment, by, digest=digest, wait_s=WAIT_S)
        else:
            answer = await run.approve(
                gate, comment, by, pattern=action == "approve-pattern", digest=digest, wait_s=WAIT_S
            )
        return f"gate {gate} answered: {answer.value}"
    value = {"approve": APPROVE, "reject": REJECT}.get(action) or str(form.get("value", ""))
    answer = await engine.run(run_id).answer(value, gate, comment=comment, by=by, wait_s=WAIT_S)
    return f"gate {gate} answered: {answer.value}"


def _number(form: FormData, name: str, kind: Callable[[str], Any]) -> Any:
    text = str(form.get(name, "")).strip()
    if not text:
        return None
    try:
        return kind(text)
    except ValueError:
        raise UsageError(f"{name} '{text}' is not a number") from None


async def _inbox_events(request: Request) -> Response:
    """The open questions' keys whenever they change; the page marks those gone and offers the new."""

    engine = _engine(request)

    async def keys() -> str:
        return json.dumps(await _shared(request).get("inbox", lambda: pages.inbox_keys(engine)))

    return _events(request, keys)


async def _run_events(request: Request) -> Response:
    """The run's word, its steps (as the page's table), its chart with each step's state, whenever
    they change, and whether it has ended."""
    run_id, engine = request.path_params["run_id"], _engine(request)
    plan = await engine.run(run_id).plan()  # a run's plan never changes: read once a page
    steps = TEMPLATES.get_template("_steps.html")

    async def live() -> str:
        view = await _shared(request).get(f"run {run_id}", lambda: pages.live_view(engine, run_id, plan))
        table = steps.module.steps_table(view, run_id)  # type: ignore[attr-defined]  # the template's macro
        return json.dumps({"status": view.word, "steps": str(table), "chart": view.chart, "ended": view.ended})

    return _events(request, live)


def _events(request: Request, read: Callable[[], Awaitable[str]]) -> StreamingResponse:
    async def stream() -> AsyncIterator[str]:
        last = None
        while not await request.is_disconnected():
            try:
                now = await read()
            except UserError as exc:
                now = json.dumps({"error": str(exc)})
            if now != last:
                yield f"data: {now}\n\n"
                last = now
            await asyncio.sleep(TICK_S)

    return StreamingResponse(stream(), media_type="text/event-stream", headers={"Cache-Control": "no-store"})
