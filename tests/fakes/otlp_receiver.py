"""An OTLP/HTTP collector on loopback: it decodes the protobuf export requests it is sent.

    with OtlpReceiver() as otlp:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = otlp.url       # http://127.0.0.1:PORT
        ...
        otlp.spans()        # every span received, decoded
        otlp.metrics()      # metric name -> the data points received, decoded
        otlp.bodies         # the raw bytes of every request

It holds requests to the protocol as a collector does: POST to /v1/traces, /v1/metrics or /v1/logs,
`Content-Type: application/x-protobuf`, a body that parses as the export request (gzip when the
exporter compresses); anything else is refused with the status a collector gives.
"""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest, ExportLogsServiceResponse
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as SpanProto

from tests.fakes.quiet import QuietServer

PATHS: dict[str, tuple[type[Message], type[Message]]] = {
    "/v1/traces": (ExportTraceServiceRequest, ExportTraceServiceResponse),
    "/v1/metrics": (ExportMetricsServiceRequest, ExportMetricsServiceResponse),
    "/v1/logs": (ExportLogsServiceRequest, ExportLogsServiceResponse),
}


@dataclass(frozen=True)
class Span:
    name: str
    trace_id: str
    span_id: str
    parent_id: str  # "" for a root span
    kind: str  # INTERNAL, SERVER, CLIENT, …
    service: str
    attributes: dict[str, Any]
    status: str  # UNSET, OK, ERROR
    description: str
    events: list[str]
    start_ns: int
    end_ns: int


@dataclass(frozen=True)
class Point:
    attributes: dict[str, Any]
    value: float  # a sum's or gauge's value; a histogram's sum
    count: int  # a histogram's count; 1 otherwise
    service: str


class OtlpReceiver:
    def __init__(self, host: str = "127.0.0.1") -> None:
        self.bodies: list[bytes] = []
        self.headers: list[dict[str, str]] = []
        self.requests: dict[str, list[Message]] = {path: [] for path in PATHS}
        self._lock = threading.Lock()
        self._httpd = QuietServer((host, 0), _handler_for(self))

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> OtlpReceiver:
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def receive(self, path: str, headers: dict[str, str], body: bytes) -> tuple[int, bytes]:
        kinds = PATHS.get(path)
        if kinds is None:
            return 404, b""
        if headers.get("content-type") != "application/x-protobuf":
            return 415, b""
        raw = gzip.decompress(body) if headers.get("content-encoding") == "gzip" else body
        request_type, response_type = kinds
        try:
            request = request_type.FromString(raw)
        except DecodeError:
            return 400, b""
        with self._lock:
            self.bodies.append(body)
            self.headers.append(headers)
            self.requests[path].append(request)
        return 200, response_type().SerializeToString()

    def spans(self) -> list[Span]:
        with self._lock:
            requests = list(self.requests["/v1/traces"])
        return [
            _span(span, _service(resource.resource.attributes))
            for request in requests
            for resource in request.resource_spans  # type: ignore[attr-defined]
            for scope in resource.scope_spans
            for span in scope.spans
        ]

    def metrics(self) -> dict[str, list[Point]]:
        with self._lock:
            requests = list(self.requests["/v1/metrics"])
        found: dict[str, list[Point]] = {}
        for request in requests:
            for resource in request.resource_metrics:  # type: ignore[attr-defined]
                service = _service(resource.resource.attributes)
                for scope in resource.scope_metrics:
                    for metric in scope.metrics:
                        found.setdefault(metric.name, []).extend(_points(metric, service))
        return found


def _span(span: SpanProto, service: str) -> Span:
    return Span(
        name=span.name,
        trace_id=span.trace_id.hex(),
        span_id=span.span_id.hex(),
        parent_id=span.parent_span_id.hex(),
        kind=SpanProto.SpanKind.Name(span.kind).removeprefix("SPAN_KIND_"),
        service=service,
        attributes=_attributes(span.attributes),
        status=type(span.status).StatusCode.Name(span.status.code).removeprefix("STATUS_CODE_"),
        description=span.status.message,
        events=[e.name for e in span.events],
        start_ns=span.start_time_unix_nano,
        end_ns=span.end_time_unix_nano,
    )


def _points(metric: Any, service: str) -> list[Point]:
    kind = metric.WhichOneof("data")
    data = getattr(metric, kind)
    points = []
    for p in data.data_points:
        if kind in ("histogram", "exponential_histogram"):
            points.append(Point(_attributes(p.attributes), p.sum, p.count, service))
        else:
            value = p.as_double if p.WhichOneof("value") == "as_double" else p.as_int
            points.append(Point(_attributes(p.attributes), value, 1, service))
    return points


def _attributes(pairs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in pairs}


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


def _service(pairs: list[KeyValue] | Any) -> str:
    return str(_attributes(pairs).get("service.name", ""))


def _handler_for(receiver: OtlpReceiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length)
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, reply = receiver.receive(self.path, headers, body)
            self.send_response(status)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

    return Handler
