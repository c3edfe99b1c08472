"""One cycgraph node to one IR node, with what it reads from memory and where its value goes.

A node's settings may sit on the node or under `<type>_config` (cycgraph's nesting); both read
the same. Prompts are templates the engine fills in: text from the spec that is not meant as a
template (a system prompt, a title) is quoted as raw text so braces in it stay as written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from agentrun.spec import expressions, ir
from agentrun.spec.dialects.builder import Builder
from agentrun.spec.errors import did_you_mean
from agentrun.spec.yamlpos import PosDict, position

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
# Types of the format this engine reads but does not run yet: refused by name before any run.
NOT_YET = {"map", "voting", "subgraph"}
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
}
TYPE_KEYS: dict[str, set[str]] = {
    "agent": set(),
    "synthesizer": set(),
    "router": set(),
    "tool": {"tool_id", "provider", "method", "params", "tool_args"},
    "supervisor": {"managed_nodes", "max_iterations"},
    "approval": {"prompt_message", "review_keys", "rejection_node_id"},
    "verifier": {
        "verifier_type",
        "mode",
        "pass_threshold",
        "expression",
        "path",
        "jsonpath",
        "operator",
        "expected",
        "criteria",
        "result_key",
        "throw_on_fail",
    },
}
BACKOFFS: dict[str, Literal["none", "linear", "exponential"]] = {
    "exponential": "exponential",
    "linear": "linear",
    "fixed": "none",
    "none": "none",
}


@dataclass(frozen=True)
class Compiled:
    node: ir.Node
    access: ir.Access
    path: tuple  # where the node is in the file, for later problems about it


class NodeCompiler:
    def __init__(self, build: Builder, agents: dict[str, PosDict]):
        self.build, self.agents = build, agents

    def node(self, raw: Any, at: tuple) -> Compiled | None:
        build = self.build
        if not isinstance(raw, PosDict):
            build.problem(at, "a node must be a mapping with id: and type:", "write {id: research, type: agent}")
            return None
        kind, node_id = raw.get("type"), raw.get("id")
        if not isinstance(node_id, str) or not node_id:
            build.problem(at, "a node needs an id:", "write id: research")
            return None
        if kind not in TYPES:
            hint = did_you_mean(str(kind), TYPES) or "the types are " + ", ".join(TYPES)
            build.problem((*at, "type"), f"node '{node_id}' has type '{kind}', which graphs do not have", hint)
            return None
        if kind in NOT_YET:
            hint = "use agent, tool, router, supervisor, approval, verifier or synthesizer nodes"
            build.problem((*at, "type"), f"node '{node_id}' is a {kind} node, which this engine does not run yet", hint)
            return None
        cfg = _config(raw, kind)
        self._keys(raw, cfg, at, kind)
        access = self._access(raw, cfg, at, kind, node_id)
        common = self._common(raw, at, node_id)
        make = getattr(self, f"_{kind}")
        return Compiled(make(raw, cfg, at, common, access), access, at)

    # ------------------------------------------------------------------ kinds

    def _agent(self, raw: PosDict, cfg: dict, at: tuple, common: dict, access: ir.Access) -> ir.Node:
        # The agent's system_prompt and temperature go with every call of it (ir.AgentInfo).
        agent_id = self._agent_id(raw, at)
        multi = len(access.write_keys) > 1
        return ir.Task(
            agent=agent_id,
            prompt=agent_prompt(common["title"] or common["id"], _text(cfg, "instructions", "prompt"), access),
            protocol="plain",
            output_format="json" if multi else "text",
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
        call = ir.ProviderSpec(provider=provider or "shell", method=method, params=_plain(params))
        return ir.Provider(call=call, **common)

    def _supervisor(self, raw: PosDict, cfg: dict, at: tuple, common: dict, access: ir.Access) -> ir.Node:
        agent_id = self._agent_id(raw, at)
        managed = cfg.get("managed_nodes")
        if not isinstance(managed, list) or not managed:
            self.build.problem(at, f"supervisor '{common['id']}' manages no nodes", "write managed_nodes: [a, b]")
            managed = []
        return ir.Supervisor(
            agent=agent_id,
            prompt=_text(cfg, "instructions", "prompt"),
            managed=[str(m) for m in managed],
            max_iterations=int(cfg.get("max_iterations") or 10),
            **common,
        )

    def _approval(self, raw: PosDict, cfg: dict, at: tuple, common: dict, access: ir.Access) -> ir.Node:
        message = raw_text(str(cfg.get("prompt_message") or f"Approve {common['title'] or common['id']}?"))
        review = [str(k) for k in cfg.get("review_keys") or []]
        shown = "".join(f"\n\n{k}:\n{{{{ {k} }}}}" for k in review if k.isidentifier())
        return ir.Human(prompt=message + shown, approval=True, on_reject="continue", **common)

    def _verifier(self, raw: PosDict, cfg: dict, at: tuple, common: dict, access: ir.Access) -> ir.Node:
        mode = cfg.get("verifier_type") or cfg.get("mode") or ("expression" if "expression" in cfg else "llm_judge")
        if mode not in ("llm_judge", "expression", "jsonpath"):
            self.build.problem(
                at, f"verifier '{common['id']}' has mode '{mode}'", "use llm_judge, expression or jsonpath"
            )
            mode = "expression"
        check = cfg.get("operator", "exists")
        if check not in ("exists", "equals", "matches", "gt", "gte", "lt", "lte"):
            self.build.problem(
                at,
                f"verifier '{common['id']}': unknown operator '{check}'",
                "use exists, equals, matches, gt, gte, lt or lte",
            )
            check = "exists"
        expression = str(cfg.get("expression") or "")
        if mode == "expression":
            self._expression(expression, at, common["id"])
        agent_id = self._agent_id(raw, at) if mode == "llm_judge" else "default"
        return ir.Verifier(
            mode=mode,
            agent=agent_id,
            prompt=_text(cfg, "criteria", "prompt"),
            pass_threshold=float(cfg.get("pass_threshold", 0.7)),
            expression=expression,
            path=str(cfg.get("path") or cfg.get("jsonpath") or ""),
            check=check,
            expected=_plain(cfg.get("expected")),
            throw_on_fail=bool(cfg.get("throw_on_fail")),
            **common,
        )

    # ------------------------------------------------------------------ shared

    def _common(self, raw: PosDict, at: tuple, node_id: str) -> dict[str, Any]:
        common: dict[str, Any] = {
            "id": node_id,
            "title": str(raw.get("name") or ""),
            "line": position(self.build.data, at)[0],
        }
        if raw.get("timeout_ms"):
            common["timeout_s"] = float(raw["timeout_ms"]) / 1000
        policy = raw.get("failure_policy")
        if isinstance(policy, dict):
            backoff = BACKOFFS.get(str(policy.get("backoff_strategy") or policy.get("backoff") or "none"), "none")
            common["retry"] = ir.Retry(
                attempts=int(policy.get("max_retries", 0)) + 1,
                backoff=backoff,
                delay_s=float(policy.get("initial_interval_ms", 1000)) / 1000,
            )
        budget = raw.get("budget")
        if isinstance(budget, dict):
            common["budget"] = ir.Budget(tokens=budget.get("max_tokens"), usd=budget.get("max_cost_usd"))
        comp = raw.get("compensation")
        if raw.get("requires_compensation") and isinstance(comp, dict):
            provider, _, method = str(comp.get("tool_id") or comp.get("provider") or "shell").partition(".")
            call = ir.ProviderSpec(
                provider=provider,
                method=str(comp.get("method") or method or "run"),
                params=_plain(comp.get("params") or {}),
            )
            common["compensation"] = ir.Provider(id=f"{node_id}-undo", title=f"undo {node_id}", call=call)
        elif raw.get("requires_compensation"):
            self.build.problem(
                at,
                f"node '{node_id}' requires compensation but says none",
                "add compensation: {tool_id: shell.run, params: {...}}",
            )
        return common

    def _access(self, raw: PosDict, cfg: dict, at: tuple, kind: str, node_id: str) -> ir.Access:
        reads = raw.get("read_keys", [])  # cycgraph's least privilege: goal and constraints only
        if reads == ["*"] and "read_keys" in raw:
            self.build.warn(
                (*at, "read_keys"), f"node '{node_id}' reads every memory key", "name the keys it needs in read_keys"
            )
        writes = [str(k) for k in raw.get("write_keys") or []]
        key = raw.get("default_write_key") or cfg.get("result_key") or (writes[0] if len(writes) == 1 else None)
        if key is None and kind in ("agent", "synthesizer", "tool", "verifier") and not writes:
            key = node_id
        reject = cfg.get("rejection_node_id")
        return ir.Access(
            read_keys=[str(k) for k in reads],
            write_keys=writes,
            write_key=str(key) if key else None,
            on_reject=str(reject) if reject else None,
        )

    def _agent_id(self, raw: PosDict, at: tuple) -> str:
        agent_id = raw.get("agent_id")
        if agent_id is None:
            return "default"
        if self.agents and agent_id not in self.agents:
            hint = did_you_mean(str(agent_id), self.agents) or "the bundle's agents: " + ", ".join(self.agents)
            self.build.problem((*at, "agent_id"), f"no agent '{agent_id}' in the bundle's agents", hint)
        return str(agent_id)

    def _expression(self, text: str, at: tuple, node_id: str) -> None:
        try:
            expressions.compile_expression(text)
        except expressions.ExpressionError as exc:
            self.build.problem(
                at, f"verifier '{node_id}': expression cannot be read: {exc}", "write e.g. memory.score >= 0.8"
            )

    def _keys(self, raw: PosDict, cfg: dict, at: tuple, kind: str) -> None:
        known = COMMON_KEYS | TYPE_KEYS[kind] | {f"{kind}_config"}
        for key in raw:
            if key not in known:
                hint = did_you_mean(str(key), known) or f"a {kind} node's keys: " + ", ".join(sorted(known))
                self.build.problem((*at, key), f"unknown key '{key}' on a {kind} node", hint)


def agent_prompt(title: str, instructions: str, access: ir.Access) -> str:
    """The prompt of an agent node: the run's goal and constraints, the node's own instructions,
    and how to answer; the memory keys it reads follow as its input."""
    lines = [
        "Goal: {{ goal }}",
        "{% if constraints %}Constraints:{% for c in constraints %}\n- {{ c }}{% endfor %}{% endif %}",
        f"You are the step {raw_text(title)} of this workflow.",
    ]
    if instructions:
        lines.append(raw_text(instructions))
    if len(access.write_keys) > 1:
        lines.append("Reply with one JSON object whose keys are among: " + ", ".join(access.write_keys) + ".")
    return "\n".join(lines)


def raw_text(text: str) -> str:
    """Spec text placed in a template as written, braces and all."""
    if "{" not in text and "%" not in text:
        return text
    return "{% raw %}" + text.replace("{% endraw %}", "") + "{% endraw %}"


def _config(raw: PosDict, kind: str) -> dict[str, Any]:
    nested = raw.get(f"{kind}_config")
    return {**raw, **(nested if isinstance(nested, dict) else {})}


def _text(cfg: dict, *keys: str) -> str:
    return next((str(cfg[k]) for k in keys if cfg.get(k)), "")


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
