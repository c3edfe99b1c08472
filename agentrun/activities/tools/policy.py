"""The files no tool touches as it would another: `is_protected` (never written or edited) and
`is_secret` (not read or listed either). Secret: credentials.toml and .env* by name anywhere, and
what the policy's `protected_files` names. Protected besides: the files that steer a run, by name
anywhere (agent.toml, policy.toml, agentrun.yaml) and the files this run was made from
(`steering_files`), unless the policy's `writable_files` lets agents write one. Names match in any
case and as globs (agentrun.lang.protected).

Whether a call may run at all under the rest of policy.toml (`enabled`, path globs, bash's lists,
`allow_domains`, `[mcp]`) is agentrun.policy's to decide; the file is read once, by a spec's
compiler (lang.grants.read_policy), into the ToolPolicy in models.tool_policy.
"""

from __future__ import annotations

from agentrun.lang.protected import STEERING_NAMES, listed, one_of, secret_name
from agentrun.models.tools import ToolPolicy


def is_protected(policy: ToolPolicy, rel: str) -> bool:
    """A file no tool writes or edits (`rel` from the work directory): a secret one; a file that
    steers a run by its name anywhere (agent.toml, policy.toml, agentrun.yaml) or one this run was
    read from (policy.steering_files), unless the policy's writable_files lets agents write it."""
    if is_secret(rel, policy):
        return True
    if listed(policy.writable_files, rel):
        return False
    return listed(STEERING_NAMES, rel) or one_of(policy.steering_files, rel)


def is_secret(rel: str, policy: ToolPolicy | None = None) -> bool:
    """A file no tool reads, lists, writes or edits: credentials.toml and .env* by name anywhere
    (any case), and with a policy, what its protected_files names."""
    return secret_name(rel) or (policy is not None and listed(policy.protected_files, rel))
