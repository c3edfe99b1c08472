"""Spans and log events from workflow code: the run, each run of a node (a parallel branch, a map
element, a loop round), agent calls, the other activities, gate waits and compensations.

Spans come from the global tracer provider, which the worker sets to temporalio's replay-safe one
(`temporalio.contrib.opentelemetry.create_tracer_provider`): span ids come from the workflow's
seeded random, a span started while history replays takes the workflow's time, and a span that
ends while replaying is not exported again, so a run replayed on another worker goes on with the
trace its first worker began. Spans and events never touch history: the commands a run sends are
the same with or without them.

Node spans are made only inside a traced run (the run's span is current) and events only when
the worker logs them: otherwise each hook is a context lookup and a level check.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from temporalio import workflow

from agentrun.lang import ir
from agentrun.models import calls
from agentrun.models import telemetry as names
from agentrun.models.contract import TERMINAL
from agentrun.models.drivers import driver_of, model_of
from agentrun.workflows import metrics
from agentrun.workflows.failures import TaskFailed
from agentrun.workflows.scope import RunKey, Scope

if TYPE_CHECKING:
    from agentrun.models.contract import Gate, RunState
    from agentrun.workflows.interpreter import Interpreter

_TRACER = trace.get_tracer("agentrun.workflow")
EVENTS = workflow.LoggerAdapter(logging.getLogger("agentrun.events"), None)
EVENTS.workflow_info_on_message = False  # the run id is a field of its own in a JSON line
MAX_DESCRIPTION = 500  # a failure's reason on a span, clipped


class Options:
    """Set once by the worker before it polls; workflow code only reads them."""

    content = False  # prompt and reply text on agent-call spans (AGENTRUN_TRACE_CONTENT=1)


Run = TypeVar("Run", bound=Callable[..., Awaitable[Any]])


def node_spans(run: Run) -> Run:
    """Interpreter.run with a span for each run of a node, and its start and end as events."""

    @functools.wraps(run)
    async def observed(engine: Interpreter, node: ir.NodeBase, scope: Scope | None = None, key: RunKey | None = None):
        if not _observed():
            return await run(engine, node, scope, key)
        at = str(key or engine.key_of(node, scope or Scope()))
        attributes = {
            names.RUN_ID: engine.state.run_id,
            names.NODE_ID: node.id,
            names.NODE_KEY: at,
            names.NODE_KIND: node.kind,
            names.NODE_TITLE: node.label,
        }
        with _span(f"{node.kind} {at}", attributes) as span:
            _event("node.started", at, kind=node.kind)
            try:
                value = await run(engine, node, scope, key)
            except TaskFailed as exc:
                _event("node.failed", at, logging.WARNING, kind=node.kind, error=exc.message)
                raise
            row = engine.state.tasks.get(at)
            outcome = row.status if row is not None else "completed"
            span.set_attribute(names.OUTCOME, outcome)
            _event("node.ended", at, kind=node.kind, outcome=outcome)
            return value

    return cast(Run, observed)


def retrying(key: str, attempt: int, delay_s: float, error: str) -> None:
    """A node's attempt failed and its retry policy tries again: an event on the node's span."""
    metrics.retried("node")
    span = trace.get_current_span()
    if span.is_recording():
        span.add_event("retry", {names.ATTEMPT: attempt, "agentrun.retry.delay_s": delay_s, "agentrun.error": error})
    _event("node.retrying", key, logging.WARNING, attempt=attempt, delay_s=delay_s, error=error)


class AgentCall:
    """One prompt to an agent, as its span and the engine's counts see it."""

    def __init__(self, call: calls.AgentCall, span: Span | None):
        self.call, self.span = call, span

    def replied(self, reply: calls.AgentReply, cost_usd: float) -> None:
        model = reply.model or model_of(self.call.uri)
        metrics.replied(model, reply.usage, cost_usd)
        if _logged(logging.INFO):
            fields = {
                "agent": self.call.agent_id,
                "model": model,
                "input_tokens": reply.usage.input_tokens,
                "output_tokens": reply.usage.output_tokens,
                "cost_usd": cost_usd,
                "attempt": reply.attempt,
            }
            _event("agent.replied", self.call.task_id, **fields)
        if self.span is None:
            return
        self.span.set_attributes(
            {
                names.INPUT_TOKENS: reply.usage.input_tokens,
                names.OUTPUT_TOKENS: reply.usage.output_tokens,
                names.ATTEMPT: reply.attempt,
                names.COST: cost_usd,
                names.OUTCOME: "completed",
                **({names.RESPONSE_MODEL: reply.model} if reply.model else {}),
                **({names.OUTPUT_MESSAGES: _output_messages(reply)} if Options.content else {}),
            }
        )


def agent_call(call: calls.AgentCall) -> contextlib.AbstractContextManager[AgentCall]:
    """The span of one prompt, named and described as OpenTelemetry's GenAI conventions say."""
    metrics.prompt_sent(call.agent_id, call.uri)
    if not trace.get_current_span().is_recording():
        return contextlib.nullcontext(AgentCall(call, None))  # every prompt: no generator to drive
    return _agent_call_span(call)


@contextlib.contextmanager
def _agent_call_span(call: calls.AgentCall) -> Iterator[AgentCall]:
    operation, chat = names.operation(call.uri), driver_of(call.uri).chat
    attributes: dict[str, Any] = {
        names.OPERATION: operation,
        names.PROVIDER: names.provider(call.uri),
        names.AGENT_NAME: call.agent_id,
        names.CONVERSATION: call.run_id,
        names.RUN_ID: call.run_id,
        names.NODE_KEY: call.task_id,
        names.AGENT: call.agent_id,
    }
    if chat:
        attributes[names.REQUEST_MODEL] = model_of(call.uri)
    if Options.content:
        attributes[names.INPUT_MESSAGES] = _input_messages(call)
    name = f"{operation} {model_of(call.uri) if chat else call.agent_id}"
    with _span(name, attributes, SpanKind.CLIENT) as span:
        yield AgentCall(call, span)


@contextlib.contextmanager
def tool_call(key: str, name: str, call_id: str, source: str) -> Iterator[Callable[[str, str], None]]:
    """One tool call, as OpenTelemetry's GenAI conventions name it (`execute_tool <tool>`): the
    yielded function records how it ended (ok, error, refused) and why."""

    def ended(outcome: str, reason: str) -> None:
        _event("tool.called", key, tool=name, call_id=call_id, outcome=outcome)
        if span is None:
            return
        span.set_attribute(names.OUTCOME, outcome)
        if outcome != "ok":
            span.set_attribute(names.ERROR_TYPE, outcome)
            span.set_status(Status(StatusCode.ERROR, reason[:MAX_DESCRIPTION]))

    if not trace.get_current_span().is_recording():
        span = None
        yield ended
        return
    attributes = {
        names.OPERATION: names.EXECUTE_TOOL,
        names.TOOL_NAME: name,
        names.TOOL_CALL_ID: call_id,
        names.TOOL_TYPE: "extension" if source == "local" else "function",
        names.RUN_ID: workflow.info().workflow_id,
        names.NODE_KEY: key,
    }
    with _span(f"{names.EXECUTE_TOOL} {name}", attributes) as span:
        yield ended


# The workflow's span for an activity it calls, by activity; an agent call has its own (agent_call).
ACTIVITY_SPANS = {
    calls.CHECK_CRITERIA: "success_check",
    calls.CALL_PROVIDER: "provider_call",
    calls.VALIDATE_OUTPUT: "validation",
    calls.CHECK_PRECONDITIONS: "preconditions",
}


def activity(name: str, key: str) -> contextlib.AbstractContextManager[None]:
    what = ACTIVITY_SPANS.get(name)
    if what is None or not trace.get_current_span().is_recording():
        return _UNTRACED  # every prompt: no generator to drive
    return _activity_span(what, name, key)


_UNTRACED = contextlib.nullcontext()


@contextlib.contextmanager
def _activity_span(what: str, name: str, key: str) -> Iterator[None]:
    attributes = {names.RUN_ID: workflow.info().workflow_id, names.NODE_KEY: key, "agentrun.activity": name}
    with _span(f"{what} {key}", attributes) as span:
        yield
        span.set_attribute(names.OUTCOME, "completed")


@contextlib.contextmanager
def loop_round(node: ir.Loop, scope: Scope, round: int) -> Iterator[None]:
    """One round of a loop: its body and the validator's verdict on it."""
    if not _observed():
        yield
        return
    key = str(scope.key)
    attributes = {names.NODE_ID: node.id, names.NODE_KEY: key, names.NODE_KIND: node.kind, names.ROUND: round}
    with _span(f"round {round} {key}", attributes):
        _event("loop.round", key, round=round)
        yield


@contextlib.contextmanager
def gate_wait(gate: Gate) -> Iterator[None]:
    """The wait for a person's answer (or a budget raise), and how long it took."""
    attributes = {names.GATE: gate.id, names.GATE_KIND: gate.kind, names.NODE_KEY: gate.node}
    _event("gate.opened", gate.node, gate=gate.id, gate_kind=gate.kind)
    traced = trace.get_current_span().is_recording()
    with _span(f"gate {gate.id}", attributes) if traced else contextlib.nullcontext(None) as span:
        try:
            yield
        finally:
            outcome, waited = _gate_outcome(gate), _waited_s(gate)
            if span is not None:
                span.set_attribute(names.OUTCOME, outcome)
            if waited is not None:
                metrics.gate_waited(gate.kind, outcome, waited)
            _event("gate.closed", gate.node, gate=gate.id, gate_kind=gate.kind, outcome=outcome, waited_s=waited)


@contextlib.contextmanager
def compensation(action_id: str, key: RunKey) -> Iterator[None]:
    """Undoing the step `action_id` names, with its own node's span inside."""
    if not _observed():
        yield
        return
    attributes = {names.COMPENSATES: action_id, names.NODE_KEY: str(key)}
    with _span(f"compensate {action_id}", attributes):
        _event("compensation.started", str(key), compensates=action_id)
        yield


def _ended(span: Span | None) -> None:
    if workflow.unsafe.is_replaying_history_events():
        return  # a worker evicting the run, or replaying one that ended: its end was counted live
    state: RunState | None = getattr(workflow.instance(), "run_state", None)
    if state is None or state.status not in TERMINAL:
        return  # a workflow task that failed on a bug: it is retried, the run has not ended
    metrics.run_ended(state.status)
    totals = {"tokens": state.total_tokens_used, "cost_usd": state.total_cost_usd, "retries": state.retry_count}
    if span is not None:
        span.set_attributes({names.STATUS: state.status, **{f"agentrun.{k}": v for k, v in totals.items()}})
    _event("run.ended", status=state.status, **totals)


@contextlib.contextmanager
def _span(name: str, attributes: Mapping[str, Any], kind: SpanKind = SpanKind.INTERNAL) -> Iterator[Span]:
    """A span whose failure is the node's reason, never a stack trace; a cancelled one is no error."""
    with _TRACER.start_as_current_span(
        name, kind=kind, attributes=attributes, record_exception=False, set_status_on_exception=False
    ) as span:
        try:
            yield span
        except TaskFailed as exc:
            _failed(span, exc.message)
            raise
        except asyncio.CancelledError:
            span.set_attribute(names.OUTCOME, "cancelled")
            raise
        except Exception as exc:  # the run's own failure (RunFailed), a gate that timed out
            _failed(span, getattr(exc, "message", None) or str(exc))
            raise


def _failed(span: Span, reason: str) -> None:
    span.set_attribute(names.OUTCOME, "failed")
    span.set_status(Status(StatusCode.ERROR, reason[:MAX_DESCRIPTION]))


def _observed() -> bool:
    return trace.get_current_span().is_recording() or _logged(logging.INFO)


def _logged(level: int) -> bool:
    """Whether the worker logs events of `level`. The logger's own level is read first: the
    adapter's check asks the SDK whether history is replaying, which costs more, on every node."""
    return EVENTS.logger.isEnabledFor(level) and EVENTS.isEnabledFor(level)


def _event(event: str, node: str | None = None, level: int = logging.INFO, **fields: Any) -> None:
    """A log line for log shippers (`python -m worker --log-format json`); none during replay."""
    if not _logged(level):
        return
    detail = {"event": event, **({"node_id": node} if node else {}), **fields}
    text = " ".join([event, *([node] if node else []), *(f"{k}={v}" for k, v in fields.items())])
    EVENTS.log(level, text, extra={"agentrun": detail})


def _gate_outcome(gate: Gate) -> str:
    answer = gate.answer
    if gate.status == "open" or answer is None:
        return "cancelled"
    if gate.status == "timed_out":
        return "timed_out"
    if answer.value == ir.REJECT:
        return "rejected"
    if gate.kind == "budget":
        return "raised"
    return "approved" if gate.kind == "approval" else "answered"


def _waited_s(gate: Gate) -> float | None:
    if gate.answer is None or gate.opened_at is None:
        return None
    return (gate.answer.at - gate.opened_at).total_seconds()


def _input_messages(call: calls.AgentCall) -> str:
    """What the model was sent, in the conventions' message shape: the transcript, then the prompt."""
    turns = [_message(m.role, m.content, m.tool_calls, m.tool_call_id) for m in call.transcript]
    if call.prompt:
        turns.append(_message("user", call.prompt))
    return json.dumps(turns)


def _output_messages(reply: calls.AgentReply) -> str:
    turn = _message("assistant", reply.text, reply.tool_calls)
    turn["finish_reason"] = "tool_call" if reply.tool_calls else "stop"
    return json.dumps([turn])


def _message(role: str, text: str, tool_calls: Sequence[calls.ToolCall] = (), answers: str = "") -> dict[str, Any]:
    if role == "tool":
        return {"role": "tool", "parts": [{"type": "tool_call_response", "id": answers, "response": text}]}
    parts: list[dict[str, Any]] = [{"type": "text", "content": text}] if text else []
    parts += [{"type": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments} for c in tool_calls]
    return {"role": role, "parts": parts}
