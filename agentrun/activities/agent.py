"""The run_agent activity: send one prompt to one agent and return its reply.

The driver is picked by the URI scheme. This module owns two cross-cutting concerns so the
drivers stay small: heartbeating (a crashed worker is noticed and cancellation reaches the
driver) and turning driver failures into ApplicationErrors the retry policy can act on.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime

import httpx
from temporalio import activity
from temporalio.exceptions import ApplicationError

from agentrun.activities import context, progress, threads
from agentrun.activities.agents import agentapi, anthropic, command, openai, scripted
from agentrun.activities.agents._common import AGENT_ERROR, AGENT_UNAVAILABLE
from agentrun.activities.redact import raise_redacted, redactor
from agentrun.activities.sizes import check_size
from agentrun.lang.agent_uri import AgentUri
from agentrun.models.calls import RELEASE_AGENT, RUN_AGENT, AgentCall, AgentReply

Driver = Callable[[AgentCall], Awaitable[AgentReply]]

DRIVERS: dict[str, Driver] = {
    "agentapi": agentapi.send,
    "anthropic": anthropic.send,
    "command": command.send,
    "openai": openai.send,
    "scripted": scripted.send,
}

# A heartbeat carries the reply so far (progress.Partial) when it grew, at most this often...
PROGRESS_EVERY_S = 1.0
# ...and beats this often regardless (a third of the heartbeat timeout if that is shorter).
KEEPALIVE_S = 10.0
RETRYABLE_STATUS = frozenset({408, 409, 429})


@activity.defn(name=RUN_AGENT)
async def run_agent(call: AgentCall) -> AgentReply:
    clean = redactor()  # the environment read once a call, not at every heartbeat and text
    thread = call.thread
    try:
        call = await threads.resolved(call)  # a conversation sent by reference, read whole
        sent, cut = context.fitted(call)
        reply = await _ask(driver_for(call.uri), sent, clean)
    except ApplicationError as err:
        raise_redacted(err)
    reply = _outgoing(reply, call, clean)
    if cut:
        reply = reply.model_copy(update={"cut": cut})
    if thread is not None:
        await threads.replied(thread, call, reply)
    return reply


async def _ask(driver: Driver, call: AgentCall, clean: Callable[[str], str]) -> AgentReply:
    attempt = activity.info().attempt
    with progress.tracking(call, attempt) as seen:
        beating = asyncio.create_task(_heartbeat_forever(seen, _keepalive_s(), clean))
        try:
            reply = await driver(call)
            return reply.model_copy(update={"attempt": attempt, "worker": _worker_identity()})
        except (ApplicationError, asyncio.CancelledError):
            raise
        except Exception as err:
            raise to_application_error(err, call) from err
        finally:
            beating.cancel()


def _worker_identity() -> str:
    """This worker's identity: its client's, as the worker is built (pid@host unless configured)."""
    try:
        return activity.client().identity
    except RuntimeError:  # an activity run outside a worker (ActivityEnvironment in tests)
        return ""


def _outgoing(reply: AgentReply, call: AgentCall, clean: Callable[[str], str]) -> AgentReply:
    """The reply as history may keep it: no secret in it (`clean`), and not too big to keep (then
    the step fails without asking the agent again)."""
    calls = [tc.model_copy(update={"arguments": clean(tc.arguments)}) for tc in reply.tool_calls]
    reply = reply.model_copy(update={"text": clean(reply.text), "tool_calls": calls, "stderr": clean(reply.stderr)})
    check_size(f"the reply of agent '{call.agent_id}' to task '{call.task_id}'", len(reply.model_dump_json().encode()))
    return reply


def driver_for(uri: str) -> Driver:
    scheme = AgentUri.parse(uri).scheme
    driver = DRIVERS.get(scheme)
    if driver is None:
        known = ", ".join(sorted(DRIVERS))
        raise ApplicationError(
            f"unknown agent scheme {scheme!r} in {uri!r}; known schemes: {known}",
            type=AGENT_ERROR,
            non_retryable=True,
        )
    return driver


def _keepalive_s() -> float:
    # A short heartbeat timeout must still see several beats before it expires.
    timeout = activity.info().heartbeat_timeout
    if timeout is None:
        return KEEPALIVE_S
    return max(0.05, min(KEEPALIVE_S, timeout.total_seconds() / 3))


async def _heartbeat_forever(seen: progress.Progress, keepalive_s: float, clean: Callable[[str], str]) -> None:
    """Beat at once, then with the reply so far whenever it changed (at most every
    PROGRESS_EVERY_S), and every keepalive_s regardless. Only the last beat's record may reach
    history (in a timed-out attempt's failure), so it stays small."""
    sent, sent_at = -1, float("-inf")
    while True:
        now = time.monotonic()
        if (seen.version != sent and now - sent_at >= PROGRESS_EVERY_S) or now - sent_at >= keepalive_s:
            activity.heartbeat(seen.record(clean))
            sent, sent_at = seen.version, now
        await asyncio.sleep(min(PROGRESS_EVERY_S, keepalive_s))


def to_application_error(err: Exception, call: AgentCall) -> ApplicationError:
    """Classify a driver failure: transient ones are retried, the rest fail the task."""
    where = AgentUri.parse(call.uri).scheme
    if isinstance(err, httpx.HTTPStatusError):
        return _from_status(err.response, where)
    if isinstance(err, httpx.TransportError):
        return _retryable(f"{where}: {type(err).__name__} talking to {_url_of(err)}: {err}")
    if isinstance(err, TimeoutError):
        return _retryable(f"{where}: {str(err) or f'no reply within {call.timeout_s:g}s'}")
    if isinstance(err, ConnectionError):
        return _retryable(f"{where}: connection failed: {err}")
    if isinstance(err, (ValueError, KeyError, TypeError)):
        # Malformed JSON or a missing field: the other side broke the protocol; a retry won't help.
        return ApplicationError(
            f"{where}: protocol violation: {type(err).__name__}: {err}",
            type=AGENT_ERROR,
            non_retryable=True,
        )
    return ApplicationError(f"{where}: {type(err).__name__}: {err}", type=AGENT_ERROR, non_retryable=True)


def _url_of(err: httpx.TransportError) -> str:
    try:
        return str(err.request.url)
    except RuntimeError:  # raised when the error was not tied to a request
        return "the server"


def _from_status(response: httpx.Response, where: str) -> ApplicationError:
    status = response.status_code
    message = f"{where}: HTTP {status} from {response.request.url}: {error_detail(response)}"
    if status in RETRYABLE_STATUS or status >= 500:
        return _retryable(message, retry_after(response))
    return ApplicationError(message, type=AGENT_ERROR, non_retryable=True)


def _retryable(message: str, delay: timedelta | None = None) -> ApplicationError:
    return ApplicationError(message, type=AGENT_UNAVAILABLE, non_retryable=False, next_retry_delay=delay)


def error_detail(response: httpx.Response) -> str:
    """The server's own explanation: problem+json detail, or an OpenAI/Anthropic error message."""
    try:
        body = response.json()
    except (ValueError, json.JSONDecodeError):
        return response.text[:500] or response.reason_phrase
    if isinstance(body, dict):
        nested = body.get("error")
        if isinstance(nested, dict) and nested.get("message"):
            return str(nested["message"])
        for key in ("detail", "message", "title", "error"):
            if body.get(key):
                return str(body[key])
    return json.dumps(body)[:500]


def retry_after(response: httpx.Response) -> timedelta | None:
    """Retry-After (seconds or an HTTP date), or retry-after-ms as some compatible servers send."""
    millis = response.headers.get("retry-after-ms")
    if millis:
        try:
            return timedelta(milliseconds=max(0.0, float(millis)))
        except ValueError:
            pass
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return timedelta(seconds=max(0.0, float(value)))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(timedelta(0), when - datetime.now(UTC))


@activity.defn(name=RELEASE_AGENT)
async def release_agent(call: AgentCall) -> bool:
    """End a task's refresh-mode agent (agentapi servers the driver started). True if one stopped."""
    if AgentUri.parse(call.uri).scheme != "agentapi":
        return False
    return await agentapi.release(call)
