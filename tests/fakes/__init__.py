"""Real implementations used by tests: local wire-format model servers and a tiny stdio MCP server."""
