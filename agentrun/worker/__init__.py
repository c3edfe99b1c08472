"""`python -m worker`: polls the task queue and runs AgentRun workflows and their activities."""
