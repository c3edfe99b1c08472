"""`python -m worker --log-format json`: one JSON object per line on stdout, for log shippers.

A line carries the time, level, logger and message, and what the engine knows of it: the run id,
the node (`node_id`) and `event` (run.started, node.ended, agent.replied, gate.closed, …, written
from workflow code, never again while a run replays), with the trace and span ids of the span
current when it was written, so a log line leads to its trace.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

from opentelemetry import trace
from temporalio import activity, workflow

_WORKER = logging.getLogger("agentrun.worker")
_json = False


class JsonLines(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        line.update(_temporal(record))
        line.update(getattr(record, "agentrun", None) or {})
        context = trace.get_current_span().get_span_context()
        if context.is_valid:
            line["trace_id"], line["span_id"] = f"{context.trace_id:032x}", f"{context.span_id:016x}"
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def _temporal(record: logging.LogRecord) -> dict[str, Any]:
    """The run and activity the SDK's loggers say a line is about."""
    details = getattr(record, "temporal_workflow", None) or getattr(record, "temporal_activity", None)
    if not isinstance(details, dict):
        return {}
    picked = {"run_id": details.get("workflow_id"), "activity": details.get("activity_type")}
    if "activity_type" in details:
        picked["attempt"] = details.get("attempt")
    return {k: v for k, v in picked.items() if v is not None}


def configure(log_format: str) -> None:
    """Text (the default) leaves logging as it is; JSON sends every logger's INFO and above to stdout."""
    global _json
    if log_format != "json":
        return
    _json = True
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(JsonLines())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per agent request is noise here
    # The run id and activity are fields of their own, not text appended to each message.
    workflow.logger.workflow_info_on_message = False
    activity.logger.activity_info_on_message = False


def announce(text: str, event: str, **fields: Any) -> None:
    """What the worker itself says (started, stopping): a plain line, or a JSON one."""
    if _json:
        _WORKER.info(text, extra={"agentrun": {"event": event, **fields}})
    else:
        print(text, flush=True)
