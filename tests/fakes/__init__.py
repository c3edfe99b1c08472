"""Real loopback servers that speak the agent protocols, for tests without network or API keys."""
