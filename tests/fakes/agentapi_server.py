"""A fake coder/agentapi server on loopback that enforces the protocol's rules.

The "agent" is a command that reads the user message on stdin and prints the reply. While it
works the status is `running` and a partial reply is visible as a new agent message, so a client
that takes a reply before the status is `stable` again gets a truncated answer and its test fails.

In Python:
    with FakeAgentAPI(command="tr a-z A-Z", busy_s=0.3) as server:
        ... server.url, server.received, server.rejected ...

`GET /events` streams what the real server's does (coder/agentapi lib/httpapi/events.go): on
connecting, a `message_update` for every message and a `status_change` with the current status;
then each change as it happens, `message_update` {id, role, message, time} again and again while
the agent's message grows, `status_change` {status, agent_type} when the status flips. Each as
`event: NAME` and `data: JSON` lines, the JSON as Go's encoder writes it. `events=False` plays an
older server without the endpoint (404). `server.drip()` makes the reply grow a word at a time,
each when the test allows (tests.fakes.drip).

As a stand-in for the real binary (refresh mode):
    python -m tests.fakes.agentapi_server server --type=claude --port 3284 -- CMD ARGS...
Fake-only knobs come from the environment because the real binary has no such flags:
FAKE_AGENTAPI_BUSY_S, FAKE_AGENTAPI_STARTUP_S, FAKE_AGENTAPI_LOG (a file that receives one JSON
line per event: start, message, stop).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.fakes.drip import Drip, pieces
from tests.fakes.quiet import QuietServer

BANNER = "Welcome to the fake agent. Type a message to start."
NOT_STABLE = "message can only be sent when the agent is waiting for user input"


@dataclass
class Rejection:
    status: int
    detail: str
    body: Any


@dataclass
class _State:
    status: str = "running"
    messages: list[dict[str, Any]] = field(default_factory=list)


class FakeAgentAPI:
    """A running fake agentapi. All public lists are appended to from server threads."""

    def __init__(
        self,
        command: str | Sequence[str] = "cat",
        *,
        busy_s: float = 0.3,
        startup_s: float = 0.0,
        lag_s: float = 0.0,
        cwd: str | None = None,
        agent_type: str = "claude",
        host: str = "127.0.0.1",
        port: int = 0,
        log_path: str | None = None,
        events: bool = True,
    ) -> None:
        """command: shell string or argv; gets the message on stdin, prints the reply.
        busy_s: how long the agent stays `running` after a message.
        startup_s: how long the status is `running` after start, before the first `stable`.
        lag_s: delay between accepting a message and turning `running` (the status is still the
            old `stable` meanwhile, as a screen that has not changed yet).
        events: whether GET /events is served (older agentapi servers had no such endpoint).
        """
        self.command = command
        self.busy_s = busy_s
        self.startup_s = startup_s
        self.lag_s = lag_s
        self.cwd = cwd
        self.agent_type = agent_type
        self.log_path = log_path
        self.events = events
        self.subscribers_seen = 0  # GET /events connections, ever
        self._subscribers: list[queue.Queue[tuple[str, dict[str, Any]] | None]] = []
        self._drip: Drip | None = None
        self.received: list[str] = []  # every accepted user message, in order
        self.raw_received: list[str] = []
        self.rejected: list[Rejection] = []  # every refused POST /message
        self.posts_while_running = 0
        self.garbled = 0  # GET /status answers this many more times with a body that is not JSON
        self._busy = False  # set from acceptance to settling, even while a lagging status reads stable
        self._state = _State(messages=[_message(0, "agent", BANNER)])
        self._lock = threading.Lock()
        self._httpd = QuietServer((host, port), _handler_for(self))
        self._thread: threading.Thread | None = None

    # lifecycle

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self._httpd.server_address[0]}:{self.port}"

    def start(self) -> FakeAgentAPI:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.05,), name="fake-agentapi", daemon=True
        )
        self._thread.start()
        self._log(
            "start",
            pid=os.getpid(),
            port=self.port,
            agent_type=self.agent_type,
            command=self.command,
            cwd=os.path.abspath(self.cwd or "."),
        )
        threading.Thread(target=self._finish_startup, daemon=True).start()
        return self

    def stop(self) -> None:
        with self._lock:
            for subscriber in self._subscribers:
                subscriber.put(None)  # event streams end before the server does
        self._httpd.shutdown()
        self._httpd.server_close()
        self._log("stop", pid=os.getpid())

    def __enter__(self) -> FakeAgentAPI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # observation

    @property
    def status(self) -> str:
        with self._lock:
            return self._state.status

    @property
    def messages(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(m) for m in self._state.messages]

    def drip(self) -> Drip:
        """Make the agent's replies grow a word at a time, each when the test allows."""
        self._drip = Drip()
        return self._drip

    # events, as lib/httpapi/events.go sends them

    def subscribe(self) -> queue.Queue[tuple[str, dict[str, Any]] | None]:
        """A new event stream, primed with the events that rebuild the current state."""
        stream: queue.Queue[tuple[str, dict[str, Any]] | None] = queue.Queue()
        with self._lock:
            for m in self._state.messages:
                stream.put(("message_update", _update(m)))
            stream.put(("status_change", {"status": self._state.status, "agent_type": self.agent_type}))
            self._subscribers.append(stream)
            self.subscribers_seen += 1
        return stream

    def unsubscribe(self, stream: queue.Queue[tuple[str, dict[str, Any]] | None]) -> None:
        with self._lock:
            if stream in self._subscribers:
                self._subscribers.remove(stream)

    def _emit(self, kind: str, payload: dict[str, Any]) -> None:
        """(holding the lock) Tell every subscriber."""
        for stream in self._subscribers:
            stream.put((kind, payload))

    def _set_status(self, status: str) -> None:
        """(holding the lock)"""
        if status != self._state.status:
            self._state.status = status
            self._emit("status_change", {"status": status, "agent_type": self.agent_type})

    def _show(self, index: int, content: str) -> None:
        """(holding the lock) Write message `index` (appending it if new) and tell subscribers."""
        if index == len(self._state.messages):
            self._state.messages.append(_message(index, "agent", content))
        else:
            self._state.messages[index]["content"] = content
        self._emit("message_update", _update(self._state.messages[index]))

    # protocol

    def _finish_startup(self) -> None:
        time.sleep(self.startup_s)
        with self._lock:
            self._set_status("stable")

    def status_body(self) -> dict[str, Any]:
        return {"status": self.status, "agent_type": self.agent_type, "transport": "pty"}

    def accept(self, body: Any) -> tuple[int, dict[str, Any]]:
        """Validate and take one POST /message; returns (HTTP status, JSON body)."""
        problem = _validate(body)
        if problem:
            return self._reject(problem[0], problem[1], body)
        with self._lock:
            if self._state.status != "stable" or self._busy:
                self.posts_while_running += 1
                return self._reject(409, NOT_STABLE, body)
            if body["type"] == "raw":
                self.raw_received.append(body["content"])
                return 200, {"ok": True}
            self.received.append(body["content"])
            self._state.messages.append(_message(len(self._state.messages), "user", body["content"]))
            self._emit("message_update", _update(self._state.messages[-1]))
            self._busy = True
            if not self.lag_s:
                # The real POST /message returns once the agent has started: a client that asks
                # for the status right after it sees `running`, as cyberian expects.
                self._set_status("running")
        self._log("message", content=body["content"])
        threading.Thread(target=self._work, args=(body["content"],), daemon=True).start()
        return 200, {"ok": True}

    def _reject(self, status: int, detail: str, body: Any) -> tuple[int, dict[str, Any]]:
        self.rejected.append(Rejection(status, detail, body))
        return status, _problem(status, detail)

    def _work(self, content: str) -> None:
        time.sleep(self.lag_s)
        with self._lock:
            self._set_status("running")
            index = len(self._state.messages)
        reply = self._run_agent(content)
        if self._drip is not None:
            self._drip_out(index, reply, self._drip)
        else:
            early = min(0.1, self.busy_s / 4)
            time.sleep(early)
            with self._lock:
                # For most of the busy time the screen shows the reply half written, as a real agent
                # streams it; only a client that waits for `stable` gets the whole text.
                self._show(index, reply[: len(reply) // 2])
            time.sleep(self.busy_s - early)
        with self._lock:
            self._show(index, reply)
            self._set_status("stable")
            self._busy = False

    def _drip_out(self, index: int, reply: str, drip: Drip) -> None:
        shown = ""
        for piece in pieces(reply):
            drip.turn(lambda: False)
            shown += piece
            with self._lock:
                self._show(index, shown)

    def _run_agent(self, content: str) -> str:
        shell = isinstance(self.command, str)
        done = subprocess.run(
            self.command,
            shell=shell,
            input=content,
            capture_output=True,
            text=True,
            cwd=self.cwd,
            timeout=60,
        )
        return (done.stdout + done.stderr).strip()

    def _log(self, event: str, **fields: Any) -> None:
        if self.log_path:
            with open(self.log_path, "a") as log:
                log.write(json.dumps({"event": event, **fields}) + "\n")


def _message(index: int, role: str, content: str) -> dict[str, Any]:
    return {
        "id": index,
        "role": role,
        "content": content,
        "time": datetime.now(UTC).isoformat(),
    }


def _update(message: dict[str, Any]) -> dict[str, Any]:
    """A message as a message_update event carries it: `message`, where /messages has `content`."""
    return {"id": message["id"], "role": message["role"], "message": message["content"], "time": message["time"]}


def _go_json(payload: dict[str, Any]) -> str:
    """JSON as Go's encoding/json writes it: compact, with <, > and & escaped."""
    text = json.dumps(payload, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _validate(body: Any) -> tuple[int, str] | None:
    if not isinstance(body, dict):
        return 422, "request body must be a JSON object"
    content, kind = body.get("content"), body.get("type")
    if kind not in ("user", "raw"):
        return 422, f"type must be one of [user raw], got {kind!r}"
    if not isinstance(content, str) or content == "":
        return 400, "message must not be empty"
    if kind == "user" and content != content.strip():
        return 400, "message must be trimmed of leading and trailing whitespace"
    return None


def _problem(status: int, detail: str) -> dict[str, Any]:
    title = {400: "Bad Request", 409: "Conflict", 422: "Unprocessable Entity"}.get(status, "Error")
    return {"title": title, "status": status, "detail": detail, "errors": []}


def _handler_for(fake: FakeAgentAPI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            pass

        def do_GET(self) -> None:
            if self.path == "/status" and fake.garbled > 0:
                fake.garbled -= 1  # a server restarting behind a proxy: a page, not JSON
                self._send_raw(200, b"<html><body>502 restarting</body></html>")
            elif self.path == "/status":
                self._send(200, fake.status_body())
            elif self.path == "/messages":
                self._send(200, {"messages": fake.messages})
            elif self.path == "/events" and fake.events:
                self._events()
            else:
                self._send(404, _problem(404, f"no route {self.path}"))

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path != "/message":
                self._send(404, _problem(404, f"no route {self.path}"))
                return
            try:
                body = json.loads(raw or b"null")
            except ValueError:
                self._send(400, _problem(400, "body is not JSON"))
                return
            self._send(*fake.accept(body))

        def _events(self) -> None:
            """Server-sent events until the client leaves or the server stops, headers as the real
            server's sseMiddleware sets them."""
            stream = fake.subscribe()
            try:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache, no-store, must-revalidate")
                self.send_header("X-Accel-Buffering", "no")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                while True:
                    try:
                        event = stream.get(timeout=0.1)
                    except queue.Empty:
                        if self._client_gone():
                            return
                        continue
                    if event is None:
                        break
                    data = f"event: {event[0]}\ndata: {_go_json(event[1])}\n\n".encode()
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass
            finally:
                self.close_connection = True
                fake.unsubscribe(stream)

        def _client_gone(self) -> bool:
            try:
                readable, _, _ = select.select([self.connection], [], [], 0)
                return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
            except (OSError, ValueError):
                return True

        def _send(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            kind = "application/json" if status < 400 else "application/problem+json"
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _send_raw(self, status: int, data: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def main(argv: list[str]) -> int:
    """`server --type=X --port N [other real flags] -- CMD ARGS...`, like the real binary, which
    also takes the agent command's words before `--` (`agentapi server claude --port N`)."""
    head, command = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser(prog="agentapi")
    sub = parser.add_subparsers(dest="verb", required=True)
    server = sub.add_parser("server")
    server.add_argument("command", nargs="*")
    server.add_argument("--type", default="claude")
    server.add_argument("--port", type=int, default=3284)
    for flag in ("--allowed-hosts", "--allowed-origins", "--term-width", "--initial-prompt"):
        server.add_argument(flag)
    args = parser.parse_args(head)
    fake = FakeAgentAPI(
        [*args.command, *command] or [args.type],
        busy_s=float(os.environ.get("FAKE_AGENTAPI_BUSY_S", "0.3")),
        startup_s=float(os.environ.get("FAKE_AGENTAPI_STARTUP_S", "0.3")),
        agent_type=args.type,
        port=args.port,
        log_path=os.environ.get("FAKE_AGENTAPI_LOG"),
    )
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    signal.signal(signal.SIGINT, lambda *_: stopped.set())
    fake.start()
    while not stopped.wait(0.2):
        pass
    fake.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
