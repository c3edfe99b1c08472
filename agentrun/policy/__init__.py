"""The run's tool policy decided: `decide(policy, Asked(source, tool, arguments))` says whether one
call may run, for every tool source (built-in, MCP, local), as a `Decision` (allow, refuse with
the reason the model reads, or ask: a person approves the call first, `approval`).

The policy.toml, as the Agentfile's real system reads it: a top-level `default_deny`; one table per
tool (`[read]`, `[bash]`, ...) with `enabled`, `allow` / `deny` path globs (`$WORKSPACE` and `~`
expanded, `**` recursive, deny wins), bash's `allowlist` / `denylist` and `timeout`, web tools'
`allow_domains`; `[mcp]` with `default_deny` and `allowed_tools = ["server:tool"]`. A tool with a
table is enabled unless it says otherwise; a tool without one is enabled unless `default_deny`.
Our own keys, which the real system ignores: top-level `protected_files` and `writable_files`
(activities.tools.policy) and `max_output`; in `[bash]` `max_processes`, `max_memory_mb`,
`max_file_mb`; in `[web_fetch]` `allow_private`. The file is read once, by a spec's compiler (lang.grants.read_policy, which
refuses an unknown key or a value of the wrong type), into the ToolPolicy of models.tool_policy.

A layer of its own, below the workflows and the activities that call it and above the models: it
reaches no server, no file and no clock, so the workflow may decide as well as a tool's activity."""

from agentrun.policy.decision import ALLOW, Asked, Decision, Verdict, approval, decide

__all__ = ["ALLOW", "Asked", "Decision", "Verdict", "approval", "decide"]
