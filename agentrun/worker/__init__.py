"""`python -m worker`: polls the task queue and runs AgentRun workflows and their activities."""

# How long running activities get to end when a worker stops; here, not in worker.build, because the
# command line says it on Ctrl-C without loading a worker.
GRACEFUL_SHUTDOWN_S = 10.0
# After a stop is asked the worker process ends within this, whatever the SDK still holds (a run
# it cannot let go of has kept a worker up until it was killed): the activities' grace, then a few
# seconds to close.
STOP_WITHIN_S = GRACEFUL_SHUTDOWN_S + 5.0
