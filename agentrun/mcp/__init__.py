"""The MCP server: behaviour trees driven by an agent over MCP, a thin face over the client."""
