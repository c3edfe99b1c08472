"""The names the engine's traces and metrics use, read by the workflow and the activities alike.

Agent calls follow OpenTelemetry's GenAI semantic conventions
(https://opentelemetry.io/docs/specs/semconv/gen-ai/), so LLM-aware backends show them as model
calls; everything else is the engine's own `agentrun.*`. Attributes are low-cardinality on
metrics (models, agents, kinds) and never carry a run id there.
"""

from __future__ import annotations

from agentrun.lang.agent_uri import AgentUri
from agentrun.models.drivers import driver_of

# GenAI semantic conventions
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
AGENT_NAME = "gen_ai.agent.name"
CONVERSATION = "gen_ai.conversation.id"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
TOKEN_TYPE = "gen_ai.token.type"
WORKFLOW_NAME = "gen_ai.workflow.name"
ERROR_TYPE = "error.type"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"  # function (a built-in or an MCP server's), extension (answered by the workflow)
CHAT, INVOKE_AGENT, INVOKE_WORKFLOW = "chat", "invoke_agent", "invoke_workflow"
EXECUTE_TOOL = "execute_tool"
OPERATION_DURATION = "gen_ai.client.operation.duration"  # a histogram, in seconds
TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"  # seconds from the request to the first chunk

# The engine's own
RUN_ID = "agentrun.run_id"
SPEC = "agentrun.lang"
DIALECT = "agentrun.dialect"
NODE_ID = "agentrun.node.id"
NODE_KEY = "agentrun.node.key"  # the run key: the id, with map element indexes (`score[2]`)
NODE_KIND = "agentrun.node.kind"
NODE_TITLE = "agentrun.node.title"
AGENT = "agentrun.agent"  # the agent id in the spec
ATTEMPT = "agentrun.attempt"
COST = "agentrun.cost_usd"
OUTCOME = "agentrun.outcome"  # completed, failed, skipped, cancelled; a gate's answered, timed_out…
STATUS = "agentrun.status"  # a run's final status
GATE = "agentrun.gate.id"
GATE_KIND = "agentrun.gate.kind"
ROUND = "agentrun.loop.round"
COMPENSATES = "agentrun.compensates"  # the run key of the step a compensation undoes
FAILURE_KIND = "agentrun.failure.kind"
RETRY_KIND = "agentrun.retry.kind"


def operation(uri: str) -> str:
    """`chat` for a model behind a chat API, `invoke_agent` for an agent that works on its own."""
    return CHAT if driver_of(uri).chat else INVOKE_AGENT


def provider(uri: str) -> str:
    """The provider as the conventions name it: the URI's scheme (`openai`, `anthropic`, or the
    engine's own `agentapi`, `command`, `scripted`)."""
    return AgentUri.parse(uri).scheme
