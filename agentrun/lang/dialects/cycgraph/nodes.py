"""One cycgraph node to one IR node, with what it reads from memory and where its value goes.

A node's settings may sit on the node or under `<type>_config` (cycgraph's nesting); both read
the same. Prompts are templates the engine fills in: text from the spec that is not meant as a
template (a system prompt, a title) is quoted as raw text so braces in it stay as written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentrun.lang import expressions, ir
from agentrun.lang.dialects.builder import Builder
from agentrun.lang.dialects.cycgraph.fanout import map_node, subgraph_node, voting_node
from agentrun.lang.dialects.cycgraph.policy import options
from agentrun.lang.dialects.cycgraph.tools import grant_of
from agentrun.lang.errors import did_you_mean
from agentrun.lang.grants import SAVE_TO_MEMORY
from agentrun.lang.yamlpos import PosDict, plain, position

TYPES = (
    "agent",
    "tool",
    "router",
    "supervisor",
    "map",
    "voting",
    "approval",
    "verifier",
    "subgraph",
    "synthesizer",
)
# cycgraph's other node types: refused by name before any run.
NOT_RUN_HERE = ("evolution", "reflection", "a2a")
COMMON_KEYS = {
    "id",
    "type",
    "name",
    "description",
    "agent_id",
    "read_keys",
    "write_keys",
    "default_write_key",
    "failure_policy",
    "budget",
    "requires_compensation",
    "compensation",
    "timeout_ms",
    "prompt",
    "instructions",
    "metadata",
}
TYPE_KEYS: dict[str, set[str]] = {
    "agent": {"tools"},
    "synthesizer": {"tools"},
    "router": set(),
    "tool": {"tool_id", "provider", "method", "params", "tool_args"},
    "supervisor": {"managed_nodes", "max_iterations"},
    "approval": {"prompt_message", "review_keys", "rejection_node_id", "approval_type", "timeout_ms"},
    "verifier": {
        "verifier_type",
        "type",
        "mode",
        "pass_threshold",
        "expression",
        "path",
        "jsonpath",
        "operator",
        "expected",
        "assertion",
        "target_key",
        "criteria",
        "evaluation_criteria",
        "evaluator_agent_id",
        "result_key",
        "throw_on_fail",
    },
    "map": {
        "worker_node_id",
        "items_path",
        "static_items",
        "synthesizer_node_id",
        "error_strategy",
        "max_concurrency",
        "max_items",
        "task_timeout_ms",
    },
    "voting": {"voter_agent_ids", "strategy", "vote_key", "quorum", "judge_agent_id", "weights", "task_timeout_ms"},
    "subgraph": {"subgraph_id", "input_mapping", "output_mapping", "max_iterations"},
}
# Where a kind's settings may nest, besides on the node itself (cycgraph's <kind>_config blocks).
CONFIG_KEYS = {"map": "map_reduce_config"}
CHECKS = ("exists", "equals", "matches", "gt", "gte", "lt", "lte")
APPROVAL_TIMEOUT_MS = 86_400_000  # cycgraph's: an unanswered approval is rejected after a day


@dataclass(frozen=True)
class Compiled:
    node: ir.Node
    access: ir.Access
    path: tuple  # where the node is in the file, for later problems about it


class NodeCompiler:
    def __init__(
        self, build: Builder, agents: dict[str, PosDict], grants: dict[str, ir.ToolGrant | None] | None = None
    ):
        self.build, self.agents = build, agents
        self.grants = grants or {}  # what each agent's own `tools` grant
        self.graph_id = ""  # the graph whose nodes are being compiled
        self.subgraph_refs: list[tuple[str, str, tuple]] = []  # (graph run, graph it is in, where)
        self._raw: dict[tuple, PosDict] = {}  # each node being compiled, by its path

    def node(self, raw: Any, at: tuple) -> Compiled | None:
        build = self.build
        if not isinstance(raw, PosDict):
            build.problem(at, "a node must be a mapping with id: and type:", "write {id: research, type: agent}")
            return None
        kind, node_id = raw.get("type"), raw.get("id")
        if not isinstance(node_id, str) or not node_id:
            build.problem(at, "a node needs an id:", "write id: research")
            return None
        if kind in NOT_RUN_HERE:
            hint = "the types this engine runs: " + ", ".join(TYPES)
            build.problem((*at, "type"), f"node '{node_id}' is {_a(kind)} node, which this engine does not run", hint)
            return None
        if kind not in TYPES:
            hint = did_you_mean(str(kind), TYPES) or "the types are " + ", ".join(TYPES)
            build.problem((*at, "type"), f"node '{node_id}' has type '{kind}', which graphs do not have", hint)
            return None
        self._raw[at] = raw
        cfg = self._config(raw, at, kind)
        access = self._access(raw, cfg, at, kind, node_id)
        common = {
            "id": node_id,
            "title": str(raw.get("name") or ""),
            "line": position(self.build.data, at)[0],
            **options(self.build, raw, at, node_id, kind),
        }
        make = getattr(self, f"_{kind}")
        return Compiled(make(raw, cfg, at, common, access), access, at)

    # ------------------------------------------------------------------ kinds

    def _agent(self, raw: PosDict, cfg: dict, at: tuple, common: dict, access: ir.Access) -> ir.Node:
        # The agent's system_prompt and temperature go with every call of it (ir.AgentInfo).
        agent_id = self._agent_id(raw, at)
        multi = len(access.write_keys) > 1
        own = "tools" in raw
        max_steps = self.agents.get(agent_id, PosDict()).get("max_steps")
        grant = grant_of(self.build, raw.get("tools"), (*at, "tools"), max_steps) if own else self.grants.get(agent_id)
        # An agent that saves its keys with save_to_memory answers in plain text, as in cycgraph.
        saves = grant is not None and SAVE_TO_MEMORY in grant.local
        return ir.Task(
            agent=agent_id,
            grant=grant,
            prompt=agent_prompt(common["title"] or common["id"], self.instructions(cfg), access, saves),
            protocol="plain",
            output_format="json" if multi and not saves else "text",
            **common,
        )

    _synthesizer = _agent

    def _router(self, raw: PosDict, cfg: dict, at: tuple, common: dict, access: ir.Access) -> ir.Node:
        return ir.Evaluate(condition="true", **common)

    def _tool(self, raw: PosDict, cfg: dict, at: tuple, common: dict, access: ir.Access) -> ir.Node:
        provider, _, method = str(cfg.get("tool_id") or cfg.get("provider") or "").partition(".")
        method = str(cfg.get("method") or method or "run")
        if not provider:
            self.build.problem(at, f"tool node '{common['id']}' names no tool", "write tool_id: shell.run (a provider)")
        params = cfg.get("params") or cfg.get("tool_args") or {}
        call = ir.ProviderSpec(provider=provider or "shell", method=method, params=plain(params))
        return ir.Provider(call=call, **common)

    def _supervisor(self, raw: PosDict, cfg: dict, at: tuple, common: dict, access: ir.Access) -> ir.Node:
        agent_id = self._agent_id(raw, at, cfg.get("agent_id"))
        managed = cfg.get("managed_nodes")
        if not isinstance(managed, list) or not managed:
            self.build.problem(at, f"supervisor '{common['id']}' manages no nodes", "write managed_nodes: [a, b]")
            managed = []
        return ir.Supervisor(
            agent=agent_id,
            prompt=self.instructions(cfg),
            managed=[str(m) for m in managed],
            max_iterations=int(cfg.get("max_iterations") or 10),
            **common,
        )

    def _approval(self, raw: PosDict, cfg: dict, at: tuple, common: dict, access: ir.Access) -> ir.Node:
        """A person approves or rejects; no answer within `timeout_ms` (a day unless it says) is a
        rejection, as in cycgraph."""
        message = raw_text(str(cfg.get("prompt_message") or f"Approve {common['title'] or common['id']}?"))
        review = [str(k) for k in cfg.get("review_keys") or []]
        shown = "".join(f"\n\n{k}:\n{{{{ {k} }}}}" for k in review if k.isidentifier())
        waits = cfg.get("timeout_ms", APPROVAL_TIMEOUT_MS)
        if isinstance(waits, bool) or not isinstance(waits, (int, float)) or waits <= 0:
            self.build.problem(self.at(at, "approval", "timeout_ms"), "timeout_ms: must be a number above 0", "")
            waits = APPROVAL_TIMEOUT_MS
        common = {**common, "timeout_s": waits / 1000}
        return ir.Human(
            prompt=message + shown,
            approval=True,
            choices=[ir.APPROVE, ir.REJECT],
            on_timeout=ir.REJECT,
            on_reject="continue",
            **common,
        )

    def _verifier(self, raw: PosDict, cfg: dict, at: tuple, common: dict, access: ir.Access) -> ir.Node:
        node_id = common["id"]
        mode = cfg.get("verifier_type") or cfg.get("mode") or _mode_of(cfg)
        if mode not in ("llm_judge", "expression", "jsonpath"):
            self.build.problem(at, f"verifier '{node_id}' has mode '{mode}'", "use llm_judge, expression or jsonpath")
            mode = "expression"
        given = cfg.get("assertion")
        assertion: dict[str, Any] = given if isinstance(given, dict) else {}
        check = assertion.get("op", cfg.get("operator", "exists"))
        if check not in CHECKS:
            hint = did_you_mean(str(check), CHECKS) or "use " + ", ".join(CHECKS)
            self.build.problem(at, f"verifier '{node_id}': unknown operator '{check}'", hint)
            check = "exists"
        expected = assertion.get("pattern", assertion.get("value", cfg.get("expected")))
        expression = str(cfg.get("expression") or "")
        if mode == "expression":
            self._expression(expression, at, node_id)
        judge = self._agent_id(raw, at, cfg.get("evaluator_agent_id")) if mode == "llm_judge" else "default"
        target = cfg.get("target_key")
        return ir.Verifier(
            mode=mode,
            agent=judge,
            prompt=str(cfg.get("evaluation_criteria") or cfg.get("criteria") or self.instructions(cfg)),
            pass_threshold=float(cfg.get("pass_threshold", 0.8)),
            expression=expression,
            path=str(cfg.get("path") or cfg.get("jsonpath") or ""),
            check=check,
            expected=plain(expected),
            throw_on_fail=bool(cfg.get("throw_on_fail")),
            target_key=str(target) if target else None,
            **common,
        )

    def _map(self, raw: PosDict, cfg: dict, at: tuple, common: dict, access: ir.Access) -> ir.Node:
        return map_node(self, cfg, at, common, access)

    def _voting(self, raw: PosDict, cfg: dict, at: tuple, common: dict, access: ir.Access) -> ir.Node:
        return voting_node(self, raw, cfg, at, common, access)

    def _subgraph(self, raw: PosDict, cfg: dict, at: tuple, common: dict, access: ir.Access) -> ir.Node:
        return subgraph_node(self, cfg, at, common, access)

    # ------------------------------------------------------------------ shared

    def _config(self, raw: PosDict, at: tuple, kind: str) -> dict[str, Any]:
        """The node's settings: on the node, or under its `<kind>_config` block (a verifier's
        `type` there is its mode). Unknown keys in either are problems."""
        block = CONFIG_KEYS.get(kind, f"{kind}_config")
        known = COMMON_KEYS | TYPE_KEYS[kind] | {block}
        self.build.unknown_keys(raw, at, known, f" on a {kind} node", f"a {kind} node's keys")
        nested = raw.get(block)
        if nested is None:
            return dict(raw)
        if not isinstance(nested, dict):
            self.build.problem((*at, block), f"{block}: must be a mapping", "")
            return dict(raw)
        inner = TYPE_KEYS[kind] | {"agent_id"}
        self.build.unknown_keys(nested, (*at, block), inner, f" in {block}", f"{block} keys")
        if kind == "verifier" and "type" in nested:
            nested = {**{k: v for k, v in nested.items() if k != "type"}, "verifier_type": nested["type"]}
        return {**raw, **nested}

    def at(self, at: tuple, kind: str, key: str) -> tuple:
        """Where a setting of the node at `at` is written: in its config block, or on the node."""
        block = CONFIG_KEYS.get(kind, f"{kind}_config")
        nested = self._raw.get(at, PosDict()).get(block)
        return (*at, block, key) if isinstance(nested, dict) and key in nested else (*at, key)

    def count(self, cfg: dict, at: tuple, kind: str, key: str, default: int, high: int) -> int:
        """A whole-number setting from 1 to `high`."""
        value = cfg.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
            self.build.problem(self.at(at, kind, key), f"{key}: must be a whole number from 1 to {high}", "")
            return default
        return value

    def instructions(self, cfg: dict) -> str:
        return next((str(cfg[k]) for k in ("instructions", "prompt") if cfg.get(k)), "")

    def prompt_of(self, title: str, instructions: str) -> str:
        """An agent's prompt that asks for one value (a vote, a verdict)."""
        return agent_prompt(title, instructions, ir.Access())

    def known_agent(self, agent_id: str, at: tuple) -> None:
        if self.agents and agent_id not in self.agents:
            hint = did_you_mean(agent_id, self.agents) or "the bundle's agents: " + ", ".join(self.agents)
            self.build.problem(at, f"no agent '{agent_id}' in the bundle's agents", hint)

    def _access(self, raw: PosDict, cfg: dict, at: tuple, kind: str, node_id: str) -> ir.Access:
        reads = raw.get("read_keys", [])  # cycgraph's least privilege: goal and constraints only
        if reads == ["*"] and "read_keys" in raw:
            self.build.warn(
                (*at, "read_keys"), f"node '{node_id}' reads every memory key", "name the keys it needs in read_keys"
            )
        writes = [str(k) for k in raw.get("write_keys") or []]
        key = raw.get("default_write_key") or cfg.get("result_key") or (writes[0] if len(writes) == 1 else None)
        if key is None and not writes:
            key = {"verifier": f"{node_id}_verification", "tool": f"{node_id}_result"}.get(kind)
            key = key or (node_id if kind in ("agent", "synthesizer") else None)
        reject = cfg.get("rejection_node_id")
        return ir.Access(
            read_keys=[str(k) for k in reads],
            write_keys=writes,
            write_key=str(key) if key else None,
            on_reject=str(reject) if reject else None,
        )

    def _agent_id(self, raw: PosDict, at: tuple, given: Any = None) -> str:
        agent_id = given or raw.get("agent_id")
        if agent_id is None:
            return "default"
        self.known_agent(str(agent_id), (*at, "agent_id"))
        return str(agent_id)

    def _expression(self, text: str, at: tuple, node_id: str) -> None:
        try:
            expressions.compile_expression(text)
        except expressions.ExpressionError as exc:
            self.build.problem(
                at, f"verifier '{node_id}': expression cannot be read: {exc}", "write e.g. memory.score >= 0.8"
            )


def _a(word: str) -> str:
    return ("an " if word[:1] in "aeiou" else "a ") + word


def _mode_of(cfg: dict) -> str:
    """A verifier that does not say its mode: what its settings are for."""
    if "expression" in cfg:
        return "expression"
    return "jsonpath" if "path" in cfg or "jsonpath" in cfg or "assertion" in cfg else "llm_judge"


def agent_prompt(title: str, instructions: str, access: ir.Access, saves: bool = False) -> str:
    """The prompt of an agent node: the run's goal and constraints, the node's own instructions,
    and how to answer; the memory keys it reads follow as its input."""
    lines = [
        "Goal: {{ goal }}",
        "{% if constraints %}Constraints:{% for c in constraints %}\n- {{ c }}{% endfor %}{% endif %}",
        f"You are the step {raw_text(title)} of this workflow.",
    ]
    if instructions:
        lines.append(raw_text(instructions))
    if saves:
        keys = ", ".join(access.write_keys or [k for k in [access.write_key] if k])
        lines.append(f"Use the save_to_memory tool to store your findings, under these keys only: {keys}.")
    elif len(access.write_keys) > 1:
        lines.append("Reply with one JSON object whose keys are among: " + ", ".join(access.write_keys) + ".")
    return "\n".join(lines)


def raw_text(text: str) -> str:
    """Spec text placed in a template as written, braces and all."""
    if "{" not in text and "%" not in text:
        return text
    return "{% raw %}" + text.replace("{% endraw %}", "") + "{% endraw %}"
