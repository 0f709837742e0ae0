"""rath-mcp MCP adapter."""
