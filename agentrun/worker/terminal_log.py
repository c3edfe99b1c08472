"""Where a worker's text log goes: one line per event on a terminal, tracebacks only when asked for
(`python -m worker --verbose`) or in a file (the worker `client start` runs in its own process).

The SDK logs every failed activity attempt as a warning with its traceback; an agent that cannot be
reached would fill a terminal with them while Temporal retries it. (`--log-format json` is
worker.logs: one JSON object per line, tracebacks in a field, for log shippers.)
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

_ACTIVITY_FAILURE = "ActivityFailure"  # the SDK's mark on "Completing activity as failed" records


class OneLine(logging.Formatter):
    """`time LEVEL what: why`: the run and activity a record is about, and only the last line of its
    exception (an agent's error message), never the traceback."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(message)s", "%H:%M:%S")

    def format(self, record: logging.LogRecord) -> str:
        record.message = _about(record) + _reason(record)
        record.asctime = self.formatTime(record, self.datefmt)
        return self.formatMessage(record)


def _about(record: logging.LogRecord) -> str:
    text = record.getMessage()
    details = getattr(record, "temporal_activity", None) or getattr(record, "temporal_workflow", None)
    if not isinstance(details, dict):
        return text.splitlines()[0] if text else ""
    text = text.replace(f" ({details})", "")
    if "activity_type" in details:
        where = f"{details['activity_type']} attempt {details.get('attempt', '?')} of run {details.get('workflow_id')}"
        return f"{where}: failed" if failure(record) else f"{where}: {text}"
    return f"run {details.get('workflow_id')}: {text.splitlines()[0]}"


def _reason(record: logging.LogRecord) -> str:
    if not record.exc_info or record.exc_info[1] is None:
        return ""
    error = record.exc_info[1]
    message = str(error).strip().splitlines()
    return f": {message[-1] if message else type(error).__name__}"


def failure(record: logging.LogRecord) -> bool:
    """An activity attempt that failed: Temporal retries it, and the run says what became of it."""
    return getattr(record, "__temporal_error_identifier", None) == _ACTIVITY_FAILURE


def to_terminal(verbose: bool = False) -> None:
    """`python -m worker`: its log on stderr, a line per event unless `verbose`."""
    handler = logging.StreamHandler(sys.stderr)
    if not verbose:
        handler.setFormatter(OneLine())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    _install([handler])


class _NotActivityFailures(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not failure(record)


def to_file(path: Path) -> None:
    """A worker inside the CLI: the full log (tracebacks too) to `path`; on the terminal only what the
    run's progress does not show already (a failed activity attempt is shown there), one line each,
    pointing at the file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    detail = logging.FileHandler(path, encoding="utf-8", delay=True)  # made by the first record
    detail.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    terminal = logging.StreamHandler(sys.stderr)
    terminal.setFormatter(_Pointing(path))
    terminal.addFilter(_NotActivityFailures())
    _install([detail, terminal])


class _Pointing(OneLine):
    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def format(self, record: logging.LogRecord) -> str:
        return f"{super().format(record)} (details in {self.path})"


def _install(handlers: list[logging.Handler]) -> None:
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(logging.WARNING)
