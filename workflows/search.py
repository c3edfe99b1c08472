"""The search attributes a run sets, so people can filter runs in Temporal Web."""

from temporalio.common import SearchAttributeKey

SPEC = SearchAttributeKey.for_keyword("AgentRunSpec")
STATUS = SearchAttributeKey.for_keyword("AgentRunStatus")
ALL = (SPEC, STATUS)
