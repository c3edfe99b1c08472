"""How an agent's reply is read: one module per protocol, chosen by a task's `protocol`.

`registry.PROTOCOLS` maps a protocol's name to the code that prompts and reads replies inside the
workflow. The prompts themselves are text in `agentrun.models.texts` (its `prompts.FIRST_PROMPTS`
maps a protocol to its first prompt), which inspect and dry-run show without loading Temporal;
this package itself imports nothing.
"""
