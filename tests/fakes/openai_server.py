"""A fake OpenAI-compatible (and Anthropic Messages) server on loopback.

    with FakeOpenAI(reply=lambda messages: "hi", api_key="sk-test") as server:
        os.environ["OPENAI_BASE_URL"] = server.url          # http://127.0.0.1:PORT/v1
        os.environ["ANTHROPIC_BASE_URL"] = server.base_url  # http://127.0.0.1:PORT
        server.fail_next(1, 429, retry_after=7)

It validates requests the way the real APIs do (auth, model, messages, roles), answers with the
real response shapes including token usage (words counted), streamed as server-sent events when a
request says `stream: true` (chat.completion.chunk objects for OpenAI, the Messages API's
message_start, content_block_start/delta/stop, message_delta and message_stop for Anthropic), and
records every request. `FakeOpenAI(streams=False)` plays a server that refuses `stream: true`. A request for JSON output
(`response_format`) must have been scripted a JSON reply.

A reply may be a `ToolUse("spawn_agents", {...})`: the response then carries a function call
(`tool_calls` for OpenAI, a `tool_use` block for Anthropic); `ToolUse(..., also=(ToolUse(...),))`
carries several in one reply, as a model making parallel tool calls does. Requests are held to the APIs' tool
rules: offered tools are well-formed, a call is answered by a tool result naming its id, in the
turn right after it, before the conversation goes on.

Per-model control, so one server can play several agents of a run:

    server = FakeOpenAI(by_model={"planner": "PLAN", "coder": ["one", "two"]}, delay_s={"slow": 2})
    gate = server.hold("coder")          # coder requests now block inside the handler...
    server.in_flight("coder")            # ...and are counted here while they wait
    server.release("coder")              # (or gate.set()) lets them, and later ones, through
    server.prompts_for("coder")          # the last user message of every coder request
    drip = server.drip("coder")          # coder replies stream a word at a time, as the test allows
                                         # (tests.fakes.drip)

A held or delayed request whose client goes away (a killed worker, a cancelled activity) is
abandoned quietly: nothing is written back, it is marked `abandoned`, the server carries on.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.fakes.drip import Drip, pieces
from tests.fakes.quiet import QuietServer

Messages = list[dict[str, Any]]


@dataclass(frozen=True)
class ToolUse:
    """A reply that calls a function tool, as a model does: `text` beside it, if any.
    The request must have offered the tool, as the real APIs only let a model call those."""

    name: str
    arguments: dict[str, Any]
    text: str = ""
    also: tuple[ToolUse, ...] = ()  # more calls in the same reply (parallel tool calls), in order

    @property
    def calls(self) -> list[ToolUse]:
        return [self, *self.also]


Reply = str | ToolUse
ReplyFn = Callable[[Messages], Reply]

OPENAI_ROLES = {"system", "developer", "user", "assistant", "tool"}
ANTHROPIC_ROLES = {"user", "assistant"}


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]  # lower-cased names
    body: Any
    abandoned: bool = False  # the client went away while the request was held or delayed
    reported: tuple[int, int] | None = None  # the (input, output) tokens its reply reported

    @property
    def model(self) -> str | None:
        model = self.body.get("model") if isinstance(self.body, dict) else None
        return model if isinstance(model, str) else None

    @property
    def prompt(self) -> str | None:
        """The content of the last user message, if there is one."""
        messages = self.body.get("messages") if isinstance(self.body, dict) else None
        for m in reversed(messages if isinstance(messages, list) else []):
            if isinstance(m, dict) and m.get("role") == "user":
                return m.get("content") if isinstance(m.get("content"), str) else None
        return None


@dataclass
class _Failure:
    status: int
    retry_after: float | None
    message: str


@dataclass
class Streamed:
    """A response sent as server-sent events: each frame with whether it holds a piece of the
    reply (which waits for the drip, if the model has one)."""

    frames: list[tuple[str, bool]]
    drip: Drip | None = None


class ApiError(Exception):
    def __init__(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status, self.message, self.kind = status, message, kind


def echo(messages: Messages) -> str:
    return f"echo: {messages[-1]['content']}"


class FakeOpenAI:
    def __init__(
        self,
        reply: Reply | Sequence[Reply] | ReplyFn = echo,
        *,
        api_key: str | None = None,
        served_model: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        by_model: dict[str, Reply | Sequence[Reply] | ReplyFn] | None = None,
        delay_s: dict[str, float] | None = None,
        streams: bool = True,
    ) -> None:
        """reply: fixed text, a list used in order (the last repeats), or a function of messages.
        api_key: when set, requests must carry it (Bearer for OpenAI, x-api-key for Anthropic).
        served_model: the model name reported back; default the requested one.
        by_model: replies (same forms as `reply`) for particular requested models; lists are
            counted per model. Models not named here get `reply`.
        delay_s: seconds to wait, per requested model, before answering.
        streams: False for a server that answers `stream: true` with a 400, as some compatible
            servers do.
        """
        self.reply = reply
        self.api_key = api_key
        self.served_model = served_model
        self.by_model: dict[str, Reply | Sequence[Reply] | ReplyFn] = dict(by_model or {})
        self.delay_s: dict[str, float] = dict(delay_s or {})
        self.streams = streams
        self._drips: dict[str, Drip] = {}
        self.requests: list[Recorded] = []
        self._failures: list[_Failure] = []
        self._replies_given = 0
        self._given_by_model: dict[str, int] = {}
        self._gates: dict[str, threading.Event] = {}
        self._prompt_gates: dict[str, threading.Event] = {}
        self._blocked: dict[str, int] = {}
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._httpd = QuietServer((host, port), _handler_for(self))

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def url(self) -> str:
        return f"{self.base_url}/v1"

    def start(self) -> FakeOpenAI:
        threading.Thread(target=self._httpd.serve_forever, args=(0.05,), name="fake-openai", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopped.set()  # held and delayed requests give up instead of outliving the server
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def fail_next(self, count: int, status: int, *, retry_after: float | None = None, message: str = "") -> None:
        """Answer the next `count` requests with `status` (after recording them)."""
        with self._lock:
            text = message or f"injected failure {status}"
            self._failures.extend(_Failure(status, retry_after, text) for _ in range(count))

    def hold(self, model: str) -> threading.Event:
        """Make requests for `model` block until released; returns the gate (set() releases it)."""
        with self._lock:
            gate = self._gates.get(model)
            if gate is None or gate.is_set():
                gate = self._gates[model] = threading.Event()
            return gate

    def hold_prompt(self, text: str) -> threading.Event:
        """Make requests whose last message contains `text` block until the returned gate is set."""
        with self._lock:
            gate = self._prompt_gates[text] = threading.Event()
            return gate

    def release(self, model: str | None = None) -> None:
        """Let held requests for `model` (every model when None), and later ones, through."""
        with self._lock:
            gates = [self._gates.pop(model, None)] if model is not None else list(self._gates.values())
            if model is None:
                gates += list(self._prompt_gates.values())
                self._gates.clear()
        for gate in gates:
            if gate is not None:
                gate.set()

    def drip(self, model: str) -> Drip:
        """Make streamed replies for `model` go out a word at a time, each when the test allows."""
        with self._lock:
            drip = self._drips[model] = Drip()
            return drip

    def requests_for(self, model: str) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if r.model == model]

    def prompts_for(self, model: str) -> list[str]:
        """The last user message of each request for `model`, in arrival order."""
        return [r.prompt for r in self.requests_for(model) if r.prompt is not None]

    def in_flight(self, model: str) -> int:
        """Requests for `model` blocked right now (held or delayed, client still connected)."""
        with self._lock:
            return self._blocked.get(model, 0)

    # request handling, called from server threads

    def handle(
        self,
        path: str,
        headers: dict[str, str],
        body: Any,
        gone: Callable[[], bool] | None = None,
    ) -> tuple[int, dict[str, str], Any] | None:
        """The response for one request; None when the client (checked with `gone`) went away
        while the request was held or delayed, so nothing should be written back."""
        record = Recorded(path, headers, body)
        with self._lock:
            self.requests.append(record)
            failure = self._failures.pop(0) if self._failures else None
        if record.model is not None and not self._wait_turn(record, gone or (lambda: False)):
            return None
        anthropic = path == "/v1/messages"
        if failure:
            extra = {"Retry-After": f"{failure.retry_after:g}"} if failure.retry_after is not None else {}
            return (
                failure.status,
                extra,
                _error(anthropic, ApiError(failure.status, failure.message, "api_error")),
            )
        try:
            streamed = isinstance(body, dict) and body.get("stream") is True
            if streamed and not self.streams:
                raise ApiError(400, "stream: streaming is not supported by this server")
            drip = self._drips.get(record.model or "")
            if path == "/v1/chat/completions":
                reply = self._chat(headers, body)
                record.reported = (reply["usage"]["prompt_tokens"], reply["usage"]["completion_tokens"])
                if streamed:
                    return 200, {"Content-Type": "text/event-stream"}, Streamed(_chunks(reply, body), drip)
                return 200, {}, reply
            if anthropic:
                reply = self._messages(headers, body)
                record.reported = (reply["usage"]["input_tokens"], reply["usage"]["output_tokens"])
                if streamed:
                    return 200, {"Content-Type": "text/event-stream"}, Streamed(_anthropic_events(reply), drip)
                return 200, {}, reply
            raise ApiError(404, f"no route {path}", "not_found_error")
        except ApiError as err:
            return err.status, {}, _error(anthropic, err)

    def _chat(self, headers: dict[str, str], body: Any) -> dict[str, Any]:
        if self.api_key and headers.get("authorization") != f"Bearer {self.api_key}":
            raise ApiError(401, "Incorrect API key provided.", "authentication_error")
        messages = _require_chat(body, OPENAI_ROLES, _openai_content)
        offered = _offered(
            body, lambda t: (t.get("function") or {}) if t.get("type") == "function" else {}, "parameters"
        )
        _openai_tool_turns(messages)
        reply = self._next_reply(messages, body["model"])
        _json_when_asked(body, reply)
        message: dict[str, Any] = {
            "role": "assistant",
            "content": reply if isinstance(reply, str) else reply.text or None,
        }
        if isinstance(reply, ToolUse):
            message["tool_calls"] = []
            for i, use in enumerate(reply.calls):
                _may_call(use, offered)
                message["tool_calls"].append(
                    {
                        "id": f"call_{len(self.requests)}" + (f"_{i}" if i else ""),
                        "type": "function",
                        "function": {"name": use.name, "arguments": json.dumps(use.arguments)},
                    }
                )
        prompt, completion = _words(messages), _reply_words(reply)
        return {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "model": self.served_model or body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if isinstance(reply, ToolUse) else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }

    def _messages(self, headers: dict[str, str], body: Any) -> dict[str, Any]:
        if self.api_key and headers.get("x-api-key") != self.api_key:
            raise ApiError(401, "invalid x-api-key", "authentication_error")
        if not headers.get("anthropic-version"):
            raise ApiError(400, "anthropic-version header is required")
        messages = _require_chat(body, ANTHROPIC_ROLES, _anthropic_content)
        if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
            raise ApiError(400, "max_tokens: field required")
        system = body.get("system")
        if system is not None and not isinstance(system, str):
            raise ApiError(400, "system: must be a string")
        offered = _offered(body, lambda t: t, "input_schema")
        _anthropic_tool_turns(messages)
        seen = ([{"role": "system", "content": system}] if system else []) + messages
        reply = self._next_reply(seen, body["model"])
        text = reply if isinstance(reply, str) else reply.text
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text or isinstance(reply, str) else []
        if isinstance(reply, ToolUse):
            for i, use in enumerate(reply.calls):
                _may_call(use, offered)
                call_id = f"toolu_{len(self.requests)}" + (f"_{i}" if i else "")
                content.append({"type": "tool_use", "id": call_id, "name": use.name, "input": use.arguments})
        return {
            "id": f"msg_{len(self.requests)}",
            "type": "message",
            "role": "assistant",
            "model": self.served_model or body["model"],
            "content": content,
            "stop_reason": "tool_use" if isinstance(reply, ToolUse) else "end_turn",
            "usage": {"input_tokens": _words(seen), "output_tokens": _reply_words(reply)},
        }

    def _wait_turn(self, record: Recorded, gone: Callable[[], bool]) -> bool:
        """Sit out the model's delay and hold; False when the client left (or the server stopped)."""
        model = record.model
        assert model is not None
        deadline = time.monotonic() + self.delay_s.get(model, 0.0)
        with self._lock:
            gate = self._gate_for(record)
            blocked = deadline > time.monotonic() or (gate is not None and not gate.is_set())
            if blocked:
                self._blocked[model] = self._blocked.get(model, 0) + 1
        if not blocked:
            return True
        try:
            while True:
                with self._lock:
                    gate = self._gate_for(record)
                waiting = deadline - time.monotonic()
                if waiting <= 0 and (gate is None or gate.is_set()):
                    return True
                if self._stopped.is_set() or gone():
                    record.abandoned = True
                    return False
                if gate is not None and not gate.is_set():
                    gate.wait(0.05)
                else:
                    time.sleep(min(0.05, max(waiting, 0.0)))
        finally:
            with self._lock:
                self._blocked[model] -= 1

    def _gate_for(self, record: Recorded) -> threading.Event | None:
        """The gate a request waits at: its model's, else one whose text its last message holds."""
        gate = self._gates.get(record.model or "")
        if gate is not None:
            return gate
        messages = record.body.get("messages") if isinstance(record.body, dict) else None
        last = messages[-1].get("content") if isinstance(messages, list) and messages else None
        text = json.dumps(last) if not isinstance(last, str) else last
        return next((g for t, g in self._prompt_gates.items() if t in text and not g.is_set()), None)

    def _next_reply(self, messages: Messages, model: str) -> Reply:
        if model in self.by_model:
            reply = self.by_model[model]
            if callable(reply):
                return reply(messages)
            if isinstance(reply, (str, ToolUse)):
                return reply
            with self._lock:
                given = self._given_by_model.get(model, 0)
                self._given_by_model[model] = given + 1
            return reply[min(given, len(reply) - 1)]
        if callable(self.reply):
            return self.reply(messages)
        if isinstance(self.reply, (str, ToolUse)):
            return self.reply
        with self._lock:
            index = min(self._replies_given, len(self.reply) - 1)
            self._replies_given += 1
        return self.reply[index]


def _require_chat(body: Any, roles: set[str], content_ok: Callable[[dict[str, Any]], str]) -> Messages:
    if not isinstance(body, dict):
        raise ApiError(400, "request body must be a JSON object")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise ApiError(400, "you must provide a model parameter")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages: must be a non-empty array")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in roles:
            raise ApiError(400, f"messages[{i}].role: must be one of {sorted(roles)}")
        wrong = content_ok(m)
        if wrong:
            raise ApiError(400, f"messages[{i}].{wrong}")
    return messages


def _openai_content(m: dict[str, Any]) -> str:
    """What is wrong with an OpenAI message's content, or ''."""
    if m["role"] == "tool" and not isinstance(m.get("tool_call_id"), str):
        return "tool_call_id: required for role tool"
    if m["role"] == "assistant" and m.get("tool_calls") and m.get("content") is None:
        return ""
    return "" if isinstance(m.get("content"), str) else "content: must be a string"


def _anthropic_content(m: dict[str, Any]) -> str:
    content = m.get("content")
    if isinstance(content, str):
        return ""
    if not isinstance(content, list) or not content:
        return "content: must be a string or a non-empty array of blocks"
    kinds = {"user": {"text", "tool_result"}, "assistant": {"text", "tool_use"}}[m["role"]]
    for j, block in enumerate(content):
        if not isinstance(block, dict) or block.get("type") not in kinds:
            return f"content[{j}].type: must be one of {sorted(kinds)}"
    return ""


def _offered(body: dict[str, Any], function: Callable[[dict[str, Any]], Any], schema: str) -> set[str]:
    """The names of the tools a request offers, each checked to be a named function with a schema."""
    tools = body.get("tools", [])
    if not isinstance(tools, list):
        raise ApiError(400, "tools: must be an array")
    names = set()
    for i, tool in enumerate(tools):
        spec = function(tool) if isinstance(tool, dict) else {}
        if not isinstance(spec.get("name"), str) or not isinstance(spec.get(schema), dict):
            raise ApiError(400, f"tools[{i}]: a function needs a name and a {schema} object")
        if spec[schema].get("type") != "object":
            raise ApiError(400, f"tools[{i}].{schema}.type: must be 'object'")
        names.add(spec["name"])
    return names


def _may_call(reply: ToolUse, offered: set[str]) -> None:
    if reply.name not in offered:
        raise ApiError(400, f"the test scripted a call to tool {reply.name!r}, which this request did not offer")


def _openai_tool_turns(messages: Messages) -> None:
    """Every tool call answered by a `tool` message with its id right after it; no stray answers."""
    waiting: list[str] = []
    for i, m in enumerate(messages):
        if m["role"] == "tool":
            if m["tool_call_id"] not in waiting:
                raise ApiError(400, f"messages[{i}]: a 'tool' message must answer a preceding 'tool_calls' entry")
            waiting.remove(m["tool_call_id"])
            continue
        if waiting:
            raise ApiError(400, f"tool_call_ids did not have response messages: {', '.join(waiting)}")
        if m["role"] == "assistant":
            waiting = [c.get("id") for c in m.get("tool_calls") or []]
    if waiting:
        raise ApiError(400, f"tool_call_ids did not have response messages: {', '.join(waiting)}")


def _anthropic_tool_turns(messages: Messages) -> None:
    """Every tool_use block answered by a tool_result block in the user turn that follows."""
    for i, m in enumerate(messages):
        if m["role"] != "assistant" or not isinstance(m["content"], list):
            continue
        uses = {b.get("id") for b in m["content"] if b.get("type") == "tool_use"}
        if not uses:
            continue
        after = messages[i + 1] if i + 1 < len(messages) else None
        given = after["content"] if after is not None and isinstance(after["content"], list) else []
        answered = {b.get("tool_use_id") for b in given if b.get("type") == "tool_result"}
        if uses - answered:
            raise ApiError(
                400, f"messages.{i + 1}: tool_use ids were found without tool_result blocks: {sorted(uses - answered)}"
            )


def _words(messages: Messages) -> int:
    return sum(
        len(json.dumps(m["content"]).split()) if not isinstance(m["content"], str) else len(m["content"].split())
        for m in messages
    )


def _reply_words(reply: Reply) -> int:
    return (
        len(reply.split())
        if isinstance(reply, str)
        else len(reply.text.split()) + len(json.dumps(reply.arguments).split())
    )


def _json_when_asked(body: dict[str, Any], reply: Reply) -> None:
    """A request for JSON output (`response_format` json_object or json_schema) gets JSON from the
    real API; a test that scripted anything else for it is told so."""
    asked = body.get("response_format")
    if not isinstance(asked, dict) or asked.get("type") not in ("json_object", "json_schema"):
        return
    try:
        json.loads(reply if isinstance(reply, str) else reply.text)
    except ValueError:
        raise ApiError(400, f"the test scripted a reply that is not JSON for a {asked['type']} request") from None


def _chunks(reply: dict[str, Any], body: dict[str, Any]) -> list[tuple[str, bool]]:
    """A completion as the `stream: true` chunks the real API sends: the role, the content a word
    per chunk, a tool call's id and name then its arguments, the finish reason, then (when
    `stream_options.include_usage` asks) the usage alone, and [DONE]."""
    choice, head = reply["choices"][0], {k: reply[k] for k in ("id", "model")}
    head["object"] = "chat.completion.chunk"
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    frames = [chunk({"role": "assistant", "content": ""})]
    frames += [chunk({"content": piece}) for piece in pieces(message["content"] or "") if piece]
    for i, call in enumerate(message.get("tool_calls") or []):
        function = call["function"]
        named = {
            "index": i,
            "id": call["id"],
            "type": "function",
            "function": {"name": function["name"], "arguments": ""},
        }
        frames += [
            chunk({"tool_calls": [named]}),
            chunk({"tool_calls": [{"index": i, "function": {"arguments": function["arguments"]}}]}),
        ]
    frames.append(chunk({}, choice["finish_reason"]))
    options = body.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage"):
        frames.append({**head, "choices": [], "usage": reply["usage"]})
    text = [
        (f"data: {json.dumps(f)}\n\n", "content" in f["choices"][0]["delta"] if f["choices"] else False) for f in frames
    ]
    text[0] = (text[0][0], False)  # the role's chunk has no reply in it
    return [*text, ("data: [DONE]\n\n", False)]


def _anthropic_events(message: dict[str, Any]) -> list[tuple[str, bool]]:
    """A message as the Messages API streams it: message_start (no content yet, the input tokens),
    each block's start, deltas (a word of text, or a tool call's input as JSON text) and stop, a
    ping, message_delta with the stop reason and the output tokens, message_stop."""
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None}
    start["usage"] = {"input_tokens": usage["input_tokens"], "output_tokens": 1}
    events: list[tuple[str, dict[str, Any], bool]] = [("message_start", {"message": start}, False)]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            opened, deltas = (
                {"type": "text", "text": ""},
                [{"type": "text_delta", "text": p} for p in pieces(block["text"])],
            )
        else:
            opened = {**block, "input": {}}
            text = json.dumps(block["input"])
            deltas = [
                {"type": "input_json_delta", "partial_json": part}
                for part in (text[: len(text) // 2], text[len(text) // 2 :])
            ]
        events.append(("content_block_start", {"index": index, "content_block": opened}, False))
        if index == 0:
            events.append(("ping", {}, False))
        events += [("content_block_delta", {"index": index, "delta": d}, d["type"] == "text_delta") for d in deltas]
        events.append(("content_block_stop", {"index": index}, False))
    stop = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    events.append(("message_delta", {"delta": stop, "usage": {"output_tokens": usage["output_tokens"]}}, False))
    events.append(("message_stop", {}, False))
    return [(f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n", piece) for kind, data, piece in events]


def _error(anthropic: bool, err: ApiError) -> dict[str, Any]:
    if anthropic:
        return {"type": "error", "error": {"type": err.kind, "message": err.message}}
    return {"error": {"message": err.message, "type": err.kind, "param": None, "code": None}}


def _handler_for(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            pass

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {k.lower(): v for k, v in self.headers.items()}
            try:
                body = json.loads(raw or b"null")
            except ValueError:
                self._send(
                    400,
                    {},
                    {"error": {"message": "body is not JSON", "type": "invalid_request_error"}},
                )
                return
            response = fake.handle(self.path, headers, body, gone=self._client_gone)
            if response is None:  # abandoned: the client hung up while we held its request
                self.close_connection = True
                return
            self._send(*response)

        def _client_gone(self) -> bool:
            """True once the peer closed or reset the connection (it sends nothing else meanwhile)."""
            sock = self.connection
            try:
                readable, _, _ = select.select([sock], [], [], 0)
                return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""
            except (OSError, ValueError):
                return True

        def _stream(self, body: Streamed) -> None:
            """Server-sent events in a chunked response, each frame flushed as it is written, a
            piece of the reply only when the drip lets it go."""
            try:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for frame, piece in body.frames:
                    if piece and body.drip is not None and not body.drip.turn(self._client_gone):
                        self.close_connection = True
                        return
                    data = frame.encode()
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

        def _send(self, status: int, extra: dict[str, str], body: Any) -> None:
            if isinstance(body, Streamed):
                self._stream(body)
                return
            data = json.dumps(body).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in extra.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client left before its answer; not our problem

    return Handler
