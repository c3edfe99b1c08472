"""Explanation without Temporal: inspect, dry-run, graphs, reports and views of a plan or a run's
state. It reads the languages and the shared models, and never reaches a server."""
