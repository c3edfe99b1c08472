"""agentrun: a durable engine for multi-agent workflows on Temporal.

`agentrun.lang` loads spec files into the plan, `agentrun.workflows` interprets it in one Temporal
workflow, `agentrun.activities` talks to agents and providers, `agentrun.worker` runs them and
`agentrun.client` is the public Python API and `agentrun.cli` the command line (`agentrun`, or
`python -m client` in a checkout).
"""
