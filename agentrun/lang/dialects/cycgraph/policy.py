"""What every cycgraph node may say about failing and spending: its `failure_policy` (retries with
backoff, a timeout), its `budget` and its compensation, as the engine's retries, budgets and saga.

cycgraph gives every node a failure policy: `max_retries` 3 unless it says otherwise, and as there
it counts attempts, not retries after the first (0 and 1 both mean one try). Backoff is
`exponential` from `initial_backoff_ms` (1000), capped at `max_backoff_ms` (60000): the first
retry waits the initial backoff. An approval is a person's answer and a router only routes: they
are never retried.
"""

from __future__ import annotations

from typing import Any, Literal

from agentrun.lang import ir
from agentrun.lang.dialects.builder import Builder
from agentrun.lang.errors import did_you_mean
from agentrun.lang.yamlpos import PosDict, plain

POLICY_KEYS = {
    "max_retries",
    "backoff_strategy",
    "initial_backoff_ms",
    "max_backoff_ms",
    "timeout_ms",
    "circuit_breaker",
}
BUDGET_KEYS = {"max_tokens", "max_cost_usd"}
BACKOFFS: dict[str, Literal["none", "linear", "exponential"]] = {
    "exponential": "exponential",
    "linear": "linear",
    "fixed": "none",
}
MAX_RETRIES = 3  # cycgraph's default, and its bounds below
RETRY_BOUNDS = (0, 10)
NEVER_RETRIED = frozenset({"approval", "router"})


def options(build: Builder, raw: PosDict, at: tuple, node_id: str, kind: str) -> dict[str, Any]:
    """The NodeBase fields a node's policy, budget and compensation give."""
    found: dict[str, Any] = {}
    policy = raw.get("failure_policy", PosDict())
    if not isinstance(policy, dict):
        build.problem((*at, "failure_policy"), "failure_policy: must be a mapping", "write {max_retries: 2}")
        policy = PosDict()
    if kind not in NEVER_RETRIED:
        found["retry"] = _retry(build, policy, (*at, "failure_policy"))
    timeout_ms = policy.get("timeout_ms", raw.get("timeout_ms"))
    if timeout_ms:
        found["timeout_s"] = _number(build, timeout_ms, (*at, "timeout_ms"), 0) / 1000
    budget = _budget(build, raw.get("budget"), (*at, "budget"))
    if budget is not None:
        found["budget"] = budget
    compensation = _compensation(build, raw, at, node_id)
    if compensation is not None:
        found["compensation"] = compensation
    return found


def _retry(build: Builder, policy: dict, at: tuple) -> ir.Retry:
    build.unknown_keys(policy, at, POLICY_KEYS)
    tries = policy.get("max_retries", MAX_RETRIES)
    low, high = RETRY_BOUNDS
    if isinstance(tries, bool) or not isinstance(tries, int) or not low <= tries <= high:
        build.problem((*at, "max_retries"), f"max_retries: must be a whole number from {low} to {high}", "")
        tries = MAX_RETRIES
    strategy = str(policy.get("backoff_strategy", "exponential"))
    if strategy not in BACKOFFS:
        hint = did_you_mean(strategy, BACKOFFS) or "use exponential, linear or fixed"
        build.problem((*at, "backoff_strategy"), f"backoff_strategy '{strategy}' is not one cycgraph has", hint)
        strategy = "exponential"
    initial = _number(build, policy.get("initial_backoff_ms", 1000), (*at, "initial_backoff_ms"), 0)
    ceiling = _number(build, policy.get("max_backoff_ms", 60_000), (*at, "max_backoff_ms"), 0)
    return ir.Retry(
        attempts=max(1, tries),
        backoff=BACKOFFS[strategy],
        delay_s=initial / 1000,
        counts="retries",
        max_delay_s=ceiling / 1000,
    )


def _budget(build: Builder, raw: Any, at: tuple) -> ir.Budget | None:
    """A node's caps on what one run of it spends (the graph counts each run of the node afresh)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        build.problem(at, "budget: must be a mapping", "write budget: {max_tokens: 2000, max_cost_usd: 0.05}")
        return None
    build.unknown_keys(raw, at, BUDGET_KEYS)
    tokens, usd = raw.get("max_tokens"), raw.get("max_cost_usd")
    if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1):
        build.problem((*at, "max_tokens"), "max_tokens: must be a whole number of 1 or more", "")
        tokens = None
    if usd is not None and (isinstance(usd, bool) or not isinstance(usd, (int, float)) or usd <= 0):
        build.problem((*at, "max_cost_usd"), "max_cost_usd: must be a number above 0", "")
        usd = None
    return ir.Budget(tokens=tokens, usd=usd) if tokens is not None or usd is not None else None


def _compensation(build: Builder, raw: PosDict, at: tuple, node_id: str) -> ir.Provider | None:
    """The provider call that undoes a node marked `requires_compensation`, rendered with the
    node's output as `output`."""
    comp = raw.get("compensation")
    if not raw.get("requires_compensation"):
        return None
    if not isinstance(comp, dict):
        build.problem(
            at,
            f"node '{node_id}' requires compensation but says none",
            "add compensation: {tool_id: shell.run, params: {...}}",
        )
        return None
    provider, _, method = str(comp.get("tool_id") or comp.get("provider") or "shell").partition(".")
    call = ir.ProviderSpec(
        provider=provider,
        method=str(comp.get("method") or method or "run"),
        params=plain(comp.get("params") or {}),
    )
    return ir.Provider(id=f"{node_id}-undo", title=f"undo {node_id}", call=call)


def _number(build: Builder, value: Any, at: tuple, low: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < low:
        build.problem(at, f"{at[-1]}: must be a number of {low:g} or more", "")
        return low
    return float(value)
