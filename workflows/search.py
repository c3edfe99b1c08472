"""The search attributes a run sets, so people can filter runs in Temporal Web.

`AgentRunWaitingFor="human_approval"` lists the runs waiting on a person.
"""

from temporalio.common import SearchAttributeKey

SPEC = SearchAttributeKey.for_keyword("AgentRunSpec")
STATUS = SearchAttributeKey.for_keyword("AgentRunStatus")
WAITING_FOR = SearchAttributeKey.for_keyword("AgentRunWaitingFor")
ALL = (SPEC, STATUS, WAITING_FOR)
