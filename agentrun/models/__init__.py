"""The shared models that cross the wire between the client, the page, the MCP server and the worker."""
