"""A small web site on loopback for the web tools: pages, redirects, errors, and a SearXNG search
endpoint speaking SearXNG's JSON API; it counts every request, so an attack test can show that a
refused fetch never reached it (a canary).

    with FakeWeb() as web:
        web.page("/doc", "<html><body><h1>Title</h1><p>text</p></body></html>")
        web.redirect("/old", "http://127.0.0.1:9/elsewhere")
        web.url("/doc")           # http://127.0.0.1:PORT/doc
        web.hits                  # every request: (path, Host header)
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlparse

from tests.fakes.quiet import QuietServer


class FakeWeb:
    def __init__(self, host: str = "127.0.0.1"):
        self.pages: dict[str, tuple[int, str, bytes, dict[str, str]]] = {}
        self.search_results: list[dict[str, str]] = []
        self.hits: list[tuple[str, str]] = []
        self.searches: list[dict[str, list[str]]] = []
        self._lock = threading.Lock()
        self._httpd = QuietServer((host, 0), _handler_for(self))

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    def url(self, path: str = "/", host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def page(
        self, path: str, body: str | bytes, content_type: str = "text/html; charset=utf-8", status: int = 200
    ) -> None:
        data = body.encode() if isinstance(body, str) else body
        self.pages[path] = (status, content_type, data, {})

    def redirect(self, path: str, location: str, status: int = 302) -> None:
        self.pages[path] = (status, "text/plain", b"", {"Location": location})

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.hits)

    def __enter__(self) -> FakeWeb:
        threading.Thread(target=self._httpd.serve_forever, args=(0.05,), name="fake-web", daemon=True).start()
        return self

    def __exit__(self, *_: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def _handler_for(web: FakeWeb) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: Any) -> None:
            pass

        def do_GET(self) -> None:
            parsed = urlparse(self.path)
            with web._lock:
                web.hits.append((parsed.path, self.headers.get("Host", "")))
            if parsed.path == "/search":
                self._search(parse_qs(parsed.query))
                return
            status, kind, body, headers = web.pages.get(parsed.path, (404, "text/plain", b"not found", {}))
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def _search(self, query: dict[str, list[str]]) -> None:
            # SearXNG answers JSON only when asked with format=json (and the instance allows it).
            web.searches.append(query)
            if query.get("format") != ["json"] or not query.get("q"):
                self.send_response(403)
                self.end_headers()
                return
            body = json.dumps({"query": query["q"][0], "results": web.search_results}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler
