"""The OpenTelemetry pieces of a process that exports telemetry (`worker.telemetry` decides whether
it does): providers, exporters, the interceptors and the Temporal runtime.

Traces: temporalio's replay-safe tracer provider (`create_tracer_provider`), so workflow code can
make spans deterministically, and its OpenTelemetry interceptor, which carries the trace context
from the client to the workflow and from the workflow to each activity in Temporal headers.
Metrics: one MeterProvider, behind temporalio's ReplaySafeMeterProvider so replayed workflow code
counts nothing twice; the Temporal SDK's own metrics reach it from the runtime's metric buffer
through temporalio's MetricsExporter.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import threading
from collections.abc import AsyncIterator
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import Histogram, MeterProvider
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor
from temporalio import client as temporal_client
from temporalio import worker as temporal_worker
from temporalio.contrib.opentelemetry import (
    MetricsExporter,
    OpenTelemetryInterceptor,
    ReplaySafeMeterProvider,
    create_tracer_provider,
)
from temporalio.runtime import (
    LogForwardingConfig,
    LoggingConfig,
    MetricBuffer,
    MetricBufferDurationFormat,
    Runtime,
    TelemetryConfig,
    TelemetryFilter,
)

from agentrun.activities.tracing import ActivityTelemetry
from agentrun.worker.telemetry import Settings, TelemetryError
from agentrun.workflows import tracing
from agentrun.workflows.run_telemetry import RunTelemetry, TracedRun

FLUSH_TIMEOUT_S = 5.0  # a collector that is down must not hold a CLI command for long
METRIC_BUFFER = 100_000  # Temporal core metric updates between two drains (every second)
# Temporal core's histograms are latencies, drained in seconds; OpenTelemetry's default buckets
# (0 to 10000) are made for milliseconds.
TEMPORAL_LATENCY_VIEW = View(
    meter_name="temporalio",
    instrument_type=Histogram,
    aggregation=ExplicitBucketHistogramAggregation(
        [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300]
    ),
)


class EngineTelemetry(temporal_client.Interceptor, temporal_worker.Interceptor):
    """The engine's own telemetry on workers made from the client: the run's span, end and
    status (workflow), a span per activity attempt and agent-call latency (activities)."""

    def __init__(self, traced: bool):
        self.traced = traced

    def workflow_interceptor_class(
        self, input: temporal_worker.WorkflowInterceptorClassInput
    ) -> type[temporal_worker.WorkflowInboundInterceptor]:
        return TracedRun if self.traced else RunTelemetry

    def intercept_activity(
        self, next: temporal_worker.ActivityInboundInterceptor
    ) -> temporal_worker.ActivityInboundInterceptor:
        return ActivityTelemetry(next, self.traced)


class Telemetry:
    """What one process exports; `install` makes it the process's, `close` flushes and stops it."""

    def __init__(self, chosen: Settings, service: str, forward_logs: bool = False):
        self.settings = chosen
        resource = _resource(service)
        self.tracer_provider = create_tracer_provider(resource=resource) if chosen.traces else None
        if self.tracer_provider is not None:
            for processor in _span_processors(chosen):
                self.tracer_provider.add_span_processor(processor)
        self.meter_provider = (
            MeterProvider(_readers(chosen), resource=resource, views=[TEMPORAL_LATENCY_VIEW])
            if chosen.metrics
            else None
        )
        self.buffer = MetricBuffer(METRIC_BUFFER, MetricBufferDurationFormat.SECONDS) if chosen.metrics else None
        self.runtime = _runtime(self.buffer, forward_logs) if self.buffer or forward_logs else None
        self._prometheus: Any = None

    def install(self) -> None:
        """The global providers, then the Prometheus endpoint. Raises TelemetryError."""
        tracing.Options.content = self.settings.content
        if self.tracer_provider is not None:
            trace.set_tracer_provider(self.tracer_provider)
        if self.meter_provider is not None:
            metrics.set_meter_provider(ReplaySafeMeterProvider(self.meter_provider))
        if self.settings.prometheus:
            self._prometheus = _serve_prometheus(*self.settings.prometheus)

    @contextlib.asynccontextmanager
    async def exporting(self) -> AsyncIterator[None]:
        """Drain the runtime's metric buffer into the meter provider while the block runs."""
        if self.buffer is None or self.meter_provider is None:
            yield
            return
        async with MetricsExporter(self.buffer, self.meter_provider):
            yield

    def connect_options(self) -> dict[str, Any]:
        """Client.connect arguments: the interceptors (workers made from the client get them too)
        and the runtime holding the metric buffer and log forwarding."""
        traced = self.tracer_provider is not None
        # temporalio's interceptor first: it makes the caller's span current from the headers.
        interceptors: list[Any] = [*([OpenTelemetryInterceptor()] if traced else []), EngineTelemetry(traced)]
        return {"interceptors": interceptors, **({"runtime": self.runtime} if self.runtime else {})}

    def close(self) -> None:
        """Export what is still held and stop, for FLUSH_TIMEOUT_S at most: the exporters retry a
        collector that is down for longer, and the process leaves with os._exit, which ends them."""
        closing = threading.Thread(target=self._shutdown, name="telemetry-close", daemon=True)
        closing.start()
        closing.join(FLUSH_TIMEOUT_S)

    def _shutdown(self) -> None:
        if self._prometheus is not None:
            self._prometheus.shutdown()
        if self.tracer_provider is not None:
            self.tracer_provider.shutdown()  # the span processor exports what it holds first
        if self.meter_provider is not None:
            self.meter_provider.shutdown()  # and the metric readers collect and export once more


def _resource(service: str) -> Resource:
    """OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, else `service` as the service's name."""
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: service}))
    return resource


# The OTLP exporters by signal and protocol: the HTTP ones ship with the engine, gRPC is optional.
_OTLP = {
    ("TRACES", "http/protobuf"): "opentelemetry.exporter.otlp.proto.http.trace_exporter:OTLPSpanExporter",
    ("TRACES", "grpc"): "opentelemetry.exporter.otlp.proto.grpc.trace_exporter:OTLPSpanExporter",
    ("METRICS", "http/protobuf"): "opentelemetry.exporter.otlp.proto.http.metric_exporter:OTLPMetricExporter",
    ("METRICS", "grpc"): "opentelemetry.exporter.otlp.proto.grpc.metric_exporter:OTLPMetricExporter",
}


def _otlp(chosen: Settings, signal: str) -> Any:
    """An OTLP exporter; it reads its endpoint, headers, timeout and the like from OTEL_* itself."""
    module, name = _OTLP[signal, chosen.protocols[signal]].split(":")
    return getattr(importlib.import_module(module), name)()


def _span_processors(chosen: Settings) -> list[SpanProcessor]:
    return [
        SimpleSpanProcessor(ConsoleSpanExporter()) if name == "console" else BatchSpanProcessor(_otlp(chosen, "TRACES"))
        for name in chosen.traces
    ]


def _readers(chosen: Settings) -> list[MetricReader]:
    readers: list[MetricReader] = []
    for name in chosen.metrics:
        if name == "prometheus":
            from opentelemetry.exporter.prometheus import PrometheusMetricReader

            readers.append(PrometheusMetricReader())
        else:
            exporter = ConsoleMetricExporter() if name == "console" else _otlp(chosen, "METRICS")
            readers.append(PeriodicExportingMetricReader(exporter))
    return readers


def _runtime(buffer: MetricBuffer | None, forward_logs: bool) -> Runtime:
    """A Temporal runtime whose core records its metrics into `buffer`, and with `forward_logs`
    writes its log lines through Python logging (so a JSON log stays JSON)."""
    logging_config = LoggingConfig.default
    if forward_logs:
        logging_config = LoggingConfig(
            filter=TelemetryFilter(core_level="WARN", other_level="ERROR"),
            forwarding=LogForwardingConfig(logger=logging.getLogger("temporalio.core")),
        )
    return Runtime(telemetry=TelemetryConfig(logging=logging_config, metrics=buffer))


def _serve_prometheus(host: str, port: int) -> Any:
    from prometheus_client import start_http_server

    try:
        server, _ = start_http_server(port, addr=host)
    except OSError as exc:
        raise TelemetryError(f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}") from None
    return server
