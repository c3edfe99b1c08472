"""`python -m worker …` is `agentrun worker …` (AGENTRUN-SHIM)."""

import runpy

runpy.run_module("agentrun.worker", run_name="__main__", alter_sys=True)
