"""The built-in tools a model agent may call, under the run's policy: one activity, run_tool."""
