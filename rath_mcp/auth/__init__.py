"""Authentication of the HTTP transports (``serve --auth none|token|oauth``).

``gate.AuthGate`` is ASGI middleware in front of the SDK's Streamable HTTP and SSE apps: it serves
health, RFC 9728 metadata and metrics, and for everything else turns a bearer token into a
``Principal`` on ``request.state`` (``rath_mcp.principal``) or answers 401/403. Grants and scope are
enforced further in (the MCP layer), from that principal. Submodules are imported where used, so
the token and audit commands load no MCP SDK.
"""
