"""The Starlette app behind `client ui`: the inbox, the runs, a run's page, the answers and notes
posted from them, and the server-sent events that keep an open page up to date.

Answers go through client.humans, as `answer`, `approve`, `reject` and `budget` send them: the run's
update validators take or refuse them, so a second answer to a gate is refused with the first one.
"""

from __future__ import annotations

import asyncio
import hmac
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, get_args

import jinja2
from starlette.applications import Starlette
from starlette.datastructures import FormData
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route
from temporalio.client import Client

from agentrun.client import humans
from agentrun.errors import Unavailable, UserError
from agentrun.ids import GateId
from agentrun.lang.ir import APPROVE, REJECT
from agentrun.models.contract import TERMINAL, AnswerInput, BudgetInput, NoteInput, limits_text
from agentrun.models.names import RunStatus
from agentrun.ui import pages
from agentrun.ui.shared import Shared

COOKIE = "agentrun_ui_token"
WAIT_S = 30.0  # how long an answer waits for a worker to hold its run, as `answer --wait 30`
TICK_S = 1.0  # how often an open page's events look again
LIST_LIMIT = 50

TEMPLATES = jinja2.Environment(loader=jinja2.PackageLoader("agentrun.ui", "templates"), autoescape=True)


def build(client: Client, token: str | None = None) -> Starlette:
    """The app, answering with `client`; every request must carry `token` when one is given."""
    app = Starlette(
        routes=[
            Route("/", _inbox),
            Route("/inbox/events", _inbox_events),
            Route("/answer", _answer, methods=["POST"]),
            Route("/runs", _runs),
            Route("/runs/{run_id}", _run),
            Route("/runs/{run_id}/events", _run_events),
            Route("/runs/{run_id}/say", _say, methods=["POST"]),
        ],
        middleware=[Middleware(TokenGate, token=token)] if token else [],
    )
    app.state.client = client
    app.state.shared = Shared(max_age_s=TICK_S / 2)
    return app


def _page(name: str, status_code: int = 200, **values: Any) -> HTMLResponse:
    return HTMLResponse(TEMPLATES.get_template(name).render(**values), status_code=status_code)


def _client(request: Request) -> Client:
    return request.app.state.client


def _shared(request: Request) -> Shared:
    """What the open pages' event streams read: one look per half tick for all of them."""
    return request.app.state.shared


async def _inbox(request: Request, said: str = "", refused: str = "", status_code: int = 200) -> Response:
    questions = await pages.inbox(_client(request))
    return _page("inbox.html", status_code, questions=questions, said=said, refused=refused)


async def _runs(request: Request) -> Response:
    """`list` with its filters: ?status=S&spec=NAME&limit=N."""
    status, spec = request.query_params.get("status") or None, request.query_params.get("spec") or None
    shown = {"status": status, "spec": spec, "statuses": list(get_args(RunStatus))}
    try:
        limit = _positive(request.query_params.get("limit") or str(LIST_LIMIT), "limit")
        rows = await pages.runs(_client(request), status, spec, limit)
    except UserError as exc:
        return _page("runs.html", 400, rows=[], limit=LIST_LIMIT, refused=str(exc), **shown)
    return _page("runs.html", rows=rows, limit=limit, **shown)


def _positive(text: str, name: str) -> int:
    if not text.isdigit() or int(text) <= 0:
        raise humans.UsageError(f"{name} '{text}' is not a whole number above 0")
    return int(text)


async def _run(request: Request, said: str = "", refused: str = "", status_code: int = 200) -> Response:
    try:
        page = await pages.run_page(_client(request), request.path_params["run_id"])
    except UserError as exc:
        return _page("missing.html", 404, refused=str(exc))
    return _page("run.html", status_code, page=page, said=said, refused=refused)


async def _say(request: Request) -> Response:
    """A note for the run's agents from its page, through the `say` update as `client say` sends
    it; the run's page again, saying what became of it (409 when the run refused it)."""
    if _foreign(request):
        return PlainTextResponse("403: notes are taken from this page only", status_code=403)
    form = await request.form()
    run_id = request.path_params["run_id"]
    given = NoteInput(
        text=str(form.get("text", "")).strip(),
        step=str(form.get("step", "")).strip(),
        by=str(form.get("by", "")).strip(),
    )
    try:
        note = await humans.send_note(_client(request), run_id, given, WAIT_S)
    except UserError as exc:
        return await _run(request, refused=f"the note was not taken: {exc}", status_code=_code(exc))
    where = f"step {note.step}'s next prompt" if note.step else "the next prompt"
    return await _run(request, said=f"note {note.n} from {note.by} is for {where}")


def _foreign(request: Request) -> bool:
    """A page of another site posting here: the browser sends no token cookie (SameSite), but a
    page on loopback without a token would otherwise be obeyed."""
    origin = request.headers.get("origin")
    return bool(origin) and origin.split("://", 1)[-1] != request.headers.get("host")


def _code(exc: UserError) -> int:
    """409 when the run refused it, 503 when no worker took it, 400 for anything else."""
    return 409 if isinstance(exc, humans.Refused) else 503 if isinstance(exc, Unavailable) else 400


async def _answer(request: Request) -> Response:
    """An answer, approval, rejection or budget raise from a gate's form; the inbox again, saying
    what became of it (409 when the run refused it, 503 when no worker took it, 400 for a form it
    cannot be made of or a run that cannot take answers)."""
    if _foreign(request):
        return PlainTextResponse("403: answers are taken from this page only", status_code=403)
    form = await request.form()
    run_id, gate = str(form.get("run_id", "")), str(form.get("gate", ""))
    try:
        said = await _send(_client(request), form, run_id, GateId(gate))
    except UserError as exc:
        return await _inbox(request, refused=f"run {run_id}, gate {gate}: {exc}", status_code=_code(exc))
    return await _inbox(request, said=f"run {run_id}: {said}")


async def _send(client: Client, form: FormData, run_id: str, gate: GateId) -> str:
    action, by, comment = str(form.get("action", "")), str(form.get("by", "")).strip(), str(form.get("comment", ""))
    if action == "budget":
        raised = BudgetInput(
            gate=gate,
            tokens=_number(form, "tokens", int),
            usd=_number(form, "usd", float),
            iterations=_number(form, "iterations", int),
            comment=comment,
            by=by,
        )
        budget = await humans.raise_gate(client, run_id, raised, WAIT_S)
        return f"budget {gate} raised to {limits_text(budget)}"
    value = {"approve": APPROVE, "reject": REJECT}.get(action) or str(form.get("value", ""))
    answer = await humans.answer_gate(
        client, run_id, AnswerInput(gate=gate, value=value, comment=comment, by=by), WAIT_S
    )
    return f"gate {gate} answered: {answer.value}"


def _number(form: FormData, name: str, kind: Callable[[str], Any]) -> Any:
    text = str(form.get(name, "")).strip()
    if not text:
        return None
    try:
        return kind(text)
    except ValueError:
        raise humans.UsageError(f"{name} '{text}' is not a number") from None


async def _inbox_events(request: Request) -> Response:
    """The open questions' keys whenever they change; the page marks those gone and offers the new."""

    client = _client(request)

    async def keys() -> str:
        questions = await _shared(request).get("inbox", lambda: pages.inbox(client))
        return json.dumps(sorted(q.key for q in questions))

    return _events(request, keys)


async def _run_events(request: Request) -> Response:
    """The run's `status` lines whenever they change, and whether it has ended."""
    run_id, client = request.path_params["run_id"], _client(request)

    async def live() -> str:
        state, text = await _shared(request).get(f"run {run_id}", lambda: pages.live_lines(client, run_id))
        return json.dumps({"live": text, "ended": state.status in TERMINAL})

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


class TokenGate(BaseHTTPMiddleware):
    """Let through a request with the token as a bearer token or in the cookie; `?token=` once sets
    the cookie and sends the browser on without it in the address."""

    def __init__(self, app: Any, token: str) -> None:
        super().__init__(app)
        self.token = token

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        given = request.query_params.get("token")
        if given is not None and self._is_token(given):
            response = RedirectResponse(str(request.url.remove_query_params("token")), status_code=303)
            response.set_cookie(COOKIE, self.token, httponly=True, samesite="strict")
            return response
        bearer = request.headers.get("authorization", "")
        if (bearer.startswith("Bearer ") and self._is_token(bearer[7:])) or self._is_token(
            request.cookies.get(COOKIE, "")
        ):
            return await call_next(request)
        return PlainTextResponse(
            "401: this page needs the token in AGENTRUN_UI_TOKEN: open it once with ?token=TOKEN, or send "
            "Authorization: Bearer TOKEN",
            status_code=401,
            headers={"WWW-Authenticate": "Bearer"},
        )

    def _is_token(self, given: str) -> bool:
        return bool(given) and hmac.compare_digest(given.encode(), self.token.encode())
