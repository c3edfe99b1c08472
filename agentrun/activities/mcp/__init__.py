"""MCP servers as tool sources: the worker's live connections to them and the two activities that
list a server's tools and call one."""
