"""`python -m client` inside a checkout: the README's commands. Installed, the command is `agentrun`
and the code is `agentrun.client`; this folder is not installed (AGENTRUN-SHIM)."""
