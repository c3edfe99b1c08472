"""The AgentRun workflow: a deterministic interpreter of a Plan. No I/O, clocks or randomness here."""
