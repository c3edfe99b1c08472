"""`python -m worker`: polls the task queue and runs AgentRun workflows and their activities."""

# How long running activities get to end when a worker stops; here, not in worker.build, because the
# command line says it on Ctrl-C without loading a worker.
GRACEFUL_SHUTDOWN_S = 10.0
