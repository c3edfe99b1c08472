"""`python -m worker` inside a checkout. Installed, the command is `agentrun worker` and the code is
`agentrun.worker`; this folder is not installed (AGENTRUN-SHIM)."""
