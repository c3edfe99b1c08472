"""Failures as Temporal keeps them: the engine's own errors are written for people, so they go without
the Python stack trace of the engine code that raised them, or the chain of library exceptions
behind them (the worker's log keeps those).

Temporal Web shows a failed run's failure, and each retried activity's last failure, as they are
stored; a stack trace there is engine internals, and a long one does not fit the pending activity's
size limit, which then reads only "Failure exceeds size limit".
"""

from __future__ import annotations

import dataclasses
from typing import Any

import temporalio.api.failure.v1
from temporalio.client import Client
from temporalio.converter import DefaultFailureConverter, PayloadConverter

from agentrun.activities.agents._common import AGENT_ERROR, AGENT_UNAVAILABLE

# ApplicationError types whose message says all a person needs: the run's end, an agent's failure.
PLAIN = frozenset({"RunFailed", "RunTimedOut", "Refused", AGENT_ERROR, AGENT_UNAVAILABLE})


class PlainFailures(DefaultFailureConverter):
    def to_failure(
        self,
        exception: BaseException,
        payload_converter: PayloadConverter,
        failure: temporalio.api.failure.v1.Failure,
    ) -> None:
        super().to_failure(exception, payload_converter, failure)
        if failure.application_failure_info.type in PLAIN:
            failure.stack_trace = ""
            failure.ClearField("cause")


def with_plain_failures(client: Client) -> Client:
    """The same connection, writing failures as above."""
    config: Any = client.config()
    converter = config["data_converter"]
    config["data_converter"] = dataclasses.replace(converter, failure_converter_class=PlainFailures)
    return Client(**config)
