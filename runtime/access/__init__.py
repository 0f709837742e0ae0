"""Who may use a store from afar: bearer tokens, the audit trail, and the operational reads around them.

Knows no HTTP or MCP: ``runtime.access.tokens`` makes and checks token secrets, ``store`` is the
protocol each backend implements (``runtime/store/sqlite/access.py``, ``runtime/store/postgres/access.py``).
"""

from runtime.access.store import AuditRecord, AuditStore, OpsStore, TokenRecord, TokenStore
from runtime.access.tokens import TokenService, Verdict, parse_ttl

__all__ = ["AuditRecord", "AuditStore", "OpsStore", "TokenRecord", "TokenService", "TokenStore", "Verdict", "parse_ttl"]
