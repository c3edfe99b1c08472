"""A driven run: the agent walks a behaviour tree itself, over MCP, instead of being asked."""
