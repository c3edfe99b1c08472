"""What stands between the page and everyone who is not its person, in front of every route.

In order, for each request:
- the Host header must name this server (421 otherwise): a website that rebinds its own name to
  127.0.0.1 reaches this port, but its requests carry its name, not ours;
- a request body is at most BODY_MAX bytes (413);
- with a token, the request carries it (bearer), or the session cookie a `?token=` link sets once:
  a value derived from the token (an HMAC of it), never the token itself, so a cookie read off a
  disk or a proxy's log is no bearer token and dies with the token;
- anything sent here (not a GET) comes from no page of another origin, and a form carries
  the CSRF field the page gave it;
- every response forbids framing, sniffing and referrers, and lets run only the page's own scripts:
  those that carry this response's nonce.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable
from contextvars import ContextVar
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from urllib.parse import parse_qs

from markupsafe import Markup, escape
from starlette.datastructures import URL, Headers, MutableHeaders, QueryParams
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentrun.models import limits

TOKEN_COOKIE = "agentrun_ui_token"
CSRF_COOKIE = "agentrun_csrf"
CSRF_FIELD = "csrf"
SESSION_LABEL = b"agentrun ui session"  # what the session cookie's HMAC signs, keyed by the token
SIGNED_IN_COOKIE = "agentrun_signed_in"  # set with the token's cookie: the next page says to bookmark the bare URL
# A form holds at most a note or an answer (limits.NOTE_CHARS characters: up to 4 bytes each in UTF-8,
# 3 characters for each byte once percent-encoded) and a few short fields.
BODY_MAX = 128 * 1024
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


@dataclass
class Guarded:
    """What the page's templates need of the request being answered: the nonce its scripts carry,
    the CSRF field its forms carry, and whether the person has just signed in with a link."""

    nonce: str = field(default_factory=lambda: secrets.token_urlsafe(16))
    csrf: str = ""
    signed_in: bool = False
    fresh_csrf: str = ""  # the cookie value this response sets, when the browser had none


_current: ContextVar[Guarded] = ContextVar("agentrun_ui_guarded")


def nonce() -> str:
    """This response's script nonce, for `<script nonce="{{ nonce() }}">`."""
    return _current.get().nonce


def csrf_field() -> Markup:
    """The hidden field every form of the page sends back."""
    return Markup('<input type="hidden" name="{}" value="{}">').format(CSRF_FIELD, escape(_current.get().csrf))


def signed_in() -> bool:
    return _current.get().signed_in


def allowed_hosts(port: int, names: Iterable[str], tls: bool = False) -> frozenset[str]:
    """The Host headers the page answers: the loopback names and `names` (bare or with a port), each
    with the port; without it too on the scheme's default port, where browsers leave it out."""
    hosts = set()
    for name in (*LOOPBACK_NAMES, *names):
        name = name.strip().lower()
        if not name:
            continue
        if ":" in name and not name.startswith("["):
            name = f"[{name}]"  # a bare IPv6 address, as a Host header brackets it
        bare = name if name.endswith("]") or ":" not in name else name.rsplit(":", 1)[0]
        hosts.add(name if bare != name else f"{name}:{port}")
        if port == (443 if tls else 80):
            hosts.add(bare)
    return frozenset(hosts)


class Guard:
    """The ASGI middleware doing all of the above in front of the app."""

    def __init__(self, app: ASGIApp, hosts: frozenset[str], token: str | None, tls: bool = False) -> None:
        self.app, self.hosts, self.token, self.tls = app, hosts, token, tls
        self.secret = secrets.token_bytes(32)  # signs CSRF fields: a cookie set from elsewhere cannot be matched
        self.session = session_value(token) if token else None  # the cookie a signed-in browser holds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        guarded = Guarded()
        body: bytes | None = None  # read here for a form, to cap it and check its CSRF field
        headers = Headers(scope=scope)
        refused = self._foreign_host(headers)
        if refused is None and scope["method"] not in SAFE_METHODS:
            body = await _body(receive, headers)
            refused = _too_large() if body is None else None
        if refused is None:
            refused = self._refusal(scope, headers, body or b"", guarded)
        send = self._headed(send, guarded)
        if refused is not None:
            await refused(scope, receive, send)
            return
        token = _current.set(guarded)
        try:
            await self.app(scope, receive if body is None else _replay(body, receive), send)
        finally:
            _current.reset(token)

    def _refusal(self, scope: Scope, headers: Headers, body: bytes, guarded: Guarded) -> Response | None:
        """The token, then the CSRF field of a form; `guarded` gets what the page will need."""
        cookies = _cookies(headers)
        without = self._without_token(scope, headers, cookies) if self.token else None
        if without is not None:
            return without
        known = cookies.get(CSRF_COOKIE, "")
        guarded.fresh_csrf = "" if known else secrets.token_urlsafe(16)
        guarded.csrf = self._sign(known or guarded.fresh_csrf)
        guarded.signed_in = SIGNED_IN_COOKIE in cookies
        if scope["method"] in SAFE_METHODS:
            return None
        if _foreign(headers):
            return PlainTextResponse("403: this page takes what is sent to it from its own pages only", status_code=403)
        if self._by_bearer(headers):
            return None
        return self._csrf_refusal(body, headers, known)

    def _foreign_host(self, headers: Headers) -> Response | None:
        host = headers.get("host", "").lower()
        if host in self.hosts:
            return None
        served = ", ".join(sorted(h for h in self.hosts if ":" in h))
        return PlainTextResponse(
            f"421: this page answers only for {served}, not for the name {host!r}\n"
            "hint: open it by one of those addresses; to serve it under another name, start it with "
            "--allowed-host NAME",
            status_code=421,
        )

    def _without_token(self, scope: Scope, headers: Headers, cookies: dict[str, str]) -> Response | None:
        url = URL(scope=scope)
        given = QueryParams(scope.get("query_string", b"")).get("token")
        if given is not None and _same(given, self.token):
            bare = url.remove_query_params("token")
            response = RedirectResponse(str(bare), status_code=303, headers={"Cache-Control": "no-store"})
            response.set_cookie(TOKEN_COOKIE, self.session or "", httponly=True, samesite="strict", secure=self.tls)
            response.set_cookie(SIGNED_IN_COOKIE, "1", max_age=60, httponly=True, samesite="strict", secure=self.tls)
            return response
        if self._by_bearer(headers) or _same(cookies.get(TOKEN_COOKIE, ""), self.session):
            return None
        return PlainTextResponse(
            "401: this page needs the token in AGENTRUN_UI_TOKEN: open it once with ?token=TOKEN, or send "
            "Authorization: Bearer TOKEN",
            status_code=401,
            headers={"WWW-Authenticate": "Bearer"},
        )

    def _by_bearer(self, headers: Headers) -> bool:
        """A program's request with the token in its Authorization header; the scheme in any case (RFC 9110)."""
        scheme, _, given = headers.get("authorization", "").strip().partition(" ")
        return bool(self.token) and scheme.lower() == "bearer" and _same(given.strip(), self.token)

    def _sign(self, value: str) -> str:
        return f"{value}.{hmac.new(self.secret, value.encode(), hashlib.sha256).hexdigest()[:32]}"

    def _csrf_refusal(self, body: bytes, headers: Headers, known: str) -> Response | None:
        if headers.get("content-type", "").split(";")[0].strip() == "application/x-www-form-urlencoded":
            sent = parse_qs(body.decode("latin-1")).get(CSRF_FIELD, [""])[0]
        else:
            sent = ""
        if known and _same(sent, self._sign(known)):
            return None
        return PlainTextResponse(
            "403: this form is not one this page gave you (its CSRF field is missing or stale)\n"
            "hint: reload the page and send it again",
            status_code=403,
        )

    def _headed(self, send: Send, guarded: Guarded) -> Send:
        """`send` with the security headers on the response's start, and the cookies it must set."""

        async def headed(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in _security_headers(guarded.nonce, self.tls).items():
                    headers[name] = value
                for cookie in _cookies_to_set(guarded.fresh_csrf, guarded.signed_in, self.tls):
                    headers.append("set-cookie", cookie)
            await send(message)

        return headed


def session_value(token: str) -> str:
    """The session cookie's value for `token`: the same across restarts of the page (a bookmarked
    address still works), another for another token, and no way back to the token."""
    return hmac.new(token.encode(), SESSION_LABEL, hashlib.sha256).hexdigest()


def _security_headers(nonce: str, tls: bool) -> dict[str, str]:
    policy = (
        f"default-src 'self'; script-src 'nonce-{nonce}'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    )
    headers = {
        "Content-Security-Policy": policy,
        "X-Frame-Options": "DENY",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
    }
    if tls:
        headers["Strict-Transport-Security"] = "max-age=31536000"
    return headers


def _cookies_to_set(fresh_csrf: str, signed_in: bool, tls: bool) -> list[str]:
    secure = "; Secure" if tls else ""
    cookies = []
    if fresh_csrf:
        cookies.append(f"{CSRF_COOKIE}={fresh_csrf}; Path=/; HttpOnly; SameSite=Strict{secure}")
    if signed_in:  # said once: the next page does not say it again
        cookies.append(f"{SIGNED_IN_COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict{secure}")
    return cookies


def _foreign(headers: Headers) -> bool:
    """Sent by a page of another origin. A same-site page on another port of this machine gets the
    cookies (SameSite ignores ports), so the CSRF field alone would stand between it and a gate.
    `Origin: null` is what a browser sends for the page's own forms under `Referrer-Policy:
    no-referrer`: the CSRF field is what tells those apart from anyone else's."""
    origin = headers.get("origin")
    return bool(origin) and origin != "null" and origin.split("://", 1)[-1] != headers.get("host")


def _cookies(headers: Headers) -> dict[str, str]:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(headers.get("cookie", ""))
    except Exception:  # a malformed Cookie header is no cookie at all
        return {}
    return {name: morsel.value for name, morsel in jar.items()}


def _same(given: str, expected: str | None) -> bool:
    return bool(given) and bool(expected) and hmac.compare_digest(given.encode(), (expected or "").encode())


async def _body(receive: Receive, headers: Headers) -> bytes | None:
    """The request's body, or None when it is larger than BODY_MAX (said or found while reading)."""
    length = headers.get("content-length", "")
    if length.isdecimal() and int(length) > BODY_MAX:
        return None
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > BODY_MAX:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _too_large() -> Response:
    return PlainTextResponse(
        f"413: a request to this page is at most {BODY_MAX // 1024} KB\n"
        f"hint: a note or an answer is at most {limits.NOTE_CHARS:,} characters",
        status_code=413,
    )


def _replay(body: bytes, receive: Receive) -> Receive:
    """The app reads the body already read here, then waits on the connection as it would."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
