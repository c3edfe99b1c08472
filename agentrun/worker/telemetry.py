"""Which telemetry a worker or client process exports, from the standard OTEL_* variables.

- Traces go out when `OTEL_TRACES_EXPORTER` names an exporter (`otlp`, `console`), or when an OTLP
  endpoint is set (`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`).
- Metrics likewise (`OTEL_METRICS_EXPORTER`: `otlp`, `console`, `prometheus`), or on the Prometheus
  endpoint `python -m worker --metrics-port PORT` serves.
- The OpenTelemetry SDK reads everything else itself: protocol, headers, timeouts, compression,
  certificates, `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, the sampler, the export interval.

The OpenTelemetry specification would export to localhost by default; here an endpoint or an
exporter has to be asked for. With none of them set, not even the SDK is imported (`worker.otel`
builds the pieces): no provider, no interceptor, no exporter thread.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentrun.errors import UserError

if TYPE_CHECKING:
    from agentrun.worker.otel import Telemetry

TRACE_EXPORTERS = ("otlp", "console")
METRIC_EXPORTERS = ("otlp", "console", "prometheus")
PROTOCOLS = ("http/protobuf", "grpc")
GRPC_PACKAGE = "opentelemetry-exporter-otlp-proto-grpc"


class TelemetryError(UserError):
    """A telemetry setting a person can fix: one line, exit code 2."""


@dataclass(frozen=True)
class Settings:
    traces: tuple[str, ...] = ()  # exporters
    metrics: tuple[str, ...] = ()
    protocols: Mapping[str, str] = field(default_factory=dict)  # "TRACES" / "METRICS" -> OTLP protocol
    prometheus: tuple[str, int] | None = None  # host, port
    content: bool = False  # prompt and reply text on agent-call spans

    @property
    def on(self) -> bool:
        return bool(self.traces or self.metrics)


def settings(
    environ: Mapping[str, str], metrics_port: int | None = None, serves: bool = True, metrics_host: str | None = None
) -> Settings:
    """What the environment (and `--metrics-port`, `--metrics-host`) ask for. A process that does not
    `serve` (a CLI command, gone before anything could scrape it) has no Prometheus endpoint. The
    endpoint listens on loopback unless told otherwise: metrics name specs, agents and queues.
    Raises TelemetryError."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return Settings()
    traces = _exporters(environ, "TRACES", TRACE_EXPORTERS)
    chosen = _exporters(environ, "METRICS", METRIC_EXPORTERS)
    prometheus = None
    if metrics_port is not None:
        prometheus = (metrics_host or environ.get("OTEL_EXPORTER_PROMETHEUS_HOST") or "127.0.0.1", metrics_port)
    elif "prometheus" in chosen and serves:
        port = environ.get("OTEL_EXPORTER_PROMETHEUS_PORT") or "9464"
        prometheus = (environ.get("OTEL_EXPORTER_PROMETHEUS_HOST") or "localhost", _port(port))
    readers = tuple(e for e in chosen if e != "prometheus") + (("prometheus",) if prometheus else ())
    protocols = {s: _protocol(environ, s) for s, named in (("TRACES", traces), ("METRICS", readers)) if "otlp" in named}
    return Settings(traces, readers, protocols, prometheus, environ.get("AGENTRUN_TRACE_CONTENT") == "1")


def _exporters(environ: Mapping[str, str], signal: str, known: tuple[str, ...]) -> tuple[str, ...]:
    variable = f"OTEL_{signal}_EXPORTER"
    named = [n.strip().lower() for n in environ.get(variable, "").split(",") if n.strip()]
    if not named:
        endpoint = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or environ.get(f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT")
        return ("otlp",) if endpoint else ()
    if named == ["none"]:
        return ()
    for name in named:
        if name not in known:
            raise TelemetryError(
                f"{variable}={environ[variable]}: unknown exporter '{name}'; use {', '.join(known)} or none"
            )
    return tuple(dict.fromkeys(named))


def _protocol(environ: Mapping[str, str], signal: str) -> str:
    variable = f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL"
    if not environ.get(variable):
        variable = "OTEL_EXPORTER_OTLP_PROTOCOL"
    protocol = (environ.get(variable) or "http/protobuf").strip()
    if protocol not in PROTOCOLS:
        raise TelemetryError(f"{variable}={protocol}: OTLP goes out as http/protobuf (port 4318) or grpc (port 4317)")
    if protocol == "grpc" and importlib.util.find_spec("opentelemetry.exporter.otlp.proto.grpc") is None:
        raise TelemetryError(f"{variable}=grpc needs `pip install {GRPC_PACKAGE}`; or use http/protobuf (port 4318)")
    return protocol


def _port(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise TelemetryError(f"OTEL_EXPORTER_PROMETHEUS_PORT={text}: not a port number")
    return int(text)


_current: Telemetry | None = None


def connect_options() -> dict[str, Any]:
    """What Client.connect needs for this process's telemetry; nothing when there is none."""
    return _current.connect_options() if _current is not None else {}


@contextlib.asynccontextmanager
async def running(
    service: str,
    metrics_port: int | None = None,
    forward_logs: bool = False,
    serves: bool = True,
    metrics_host: str | None = None,
) -> AsyncIterator[None]:
    """This process's telemetry, for the duration of the block, flushed at its end (the CLI and
    the worker leave with os._exit, which skips atexit hooks). `service` names the process when
    OTEL_SERVICE_NAME does not; `forward_logs` sends the Temporal core's own log lines through
    Python logging; `serves` (see `settings`). Raises TelemetryError for a setting that cannot work."""
    global _current
    chosen = settings(os.environ, metrics_port, serves, metrics_host)
    if not chosen.on and not forward_logs:
        yield
        return
    from agentrun.worker.otel import Telemetry

    telemetry = Telemetry(chosen, service, forward_logs)
    try:
        telemetry.install()
        _current = telemetry
        async with telemetry.exporting():
            yield
    finally:
        _current = None
        telemetry.close()
