"""The engine's own metrics, recorded from workflow code.

Instruments come from the global meter provider, which the worker wraps in temporalio's
`ReplaySafeMeterProvider`: what workflow code records while history replays is dropped, so a
replayed run counts nothing twice. With no provider set these are OpenTelemetry's no-op proxies.
"""

from __future__ import annotations

from opentelemetry import metrics

from agentrun.models import telemetry as names
from agentrun.models.calls import Usage

_METER = metrics.get_meter("agentrun.workflow")
_PROMPTS = _METER.create_counter("agentrun.prompts", unit="{prompt}", description="Prompts sent to agents")
_TOKENS = _METER.create_counter("agentrun.tokens", unit="{token}", description="Tokens agents reported, by model")
_COST = _METER.create_counter("agentrun.cost_usd", description="US dollars agents' replies cost, by model")
_FAILURES = _METER.create_counter("agentrun.failures", unit="{failure}", description="Failures, by kind")
_RETRIES = _METER.create_counter("agentrun.retries", unit="{retry}", description="Retries: a node's or transport")
_RUNS = _METER.create_counter("agentrun.runs", unit="{run}", description="Runs ended, by final status")
_GATE_WAIT = _METER.create_histogram(
    "agentrun.gate.wait",
    unit="s",
    description="How long runs waited on a person or a paused budget",
    explicit_bucket_boundaries_advisory=[1, 10, 60, 300, 900, 3600, 4 * 3600, 24 * 3600, 7 * 24 * 3600],
)


def prompt_sent(agent: str, uri: str) -> None:
    _PROMPTS.add(1, {names.AGENT: agent, names.PROVIDER: names.provider(uri)})


def replied(model: str, usage: Usage, cost_usd: float) -> None:
    for kind, count in (("input", usage.input_tokens), ("output", usage.output_tokens)):
        if count:
            _TOKENS.add(count, {names.REQUEST_MODEL: model, names.TOKEN_TYPE: kind})
    if cost_usd:
        _COST.add(cost_usd, {names.REQUEST_MODEL: model})


def failed(kind: str, count: int = 1) -> None:
    """A failure: timeout, transport, agent, validation, budget, success_check, gate_timeout, …"""
    _FAILURES.add(count, {names.FAILURE_KIND: kind})


def retried(kind: str, count: int = 1) -> None:
    """`node` (a node's retry policy) or `transport` (an agent call the activity retried)."""
    _RETRIES.add(count, {names.RETRY_KIND: kind})


def gate_waited(kind: str, outcome: str, seconds: float) -> None:
    _GATE_WAIT.record(seconds, {names.GATE_KIND: kind, names.OUTCOME: outcome})


def run_ended(status: str) -> None:
    _RUNS.add(1, {names.STATUS: status})
