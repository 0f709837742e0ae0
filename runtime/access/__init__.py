"""Who may use a store from afar: bearer tokens, the audit trail, and the operational reads around them.

Knows no HTTP or MCP: ``runtime.access.tokens`` makes and checks token secrets, ``store`` is the
protocol the store core implements for both backends (``runtime/store/core/access.py``).

Every name is imported on first use (``runtime.lazy``): a server without ``--auth token`` never loads the token service.
"""

from typing import TYPE_CHECKING

from runtime.lazy import lazy_exports

if TYPE_CHECKING:
    from runtime.access.store import AuditRecord, AuditStore, OpsStore, TokenRecord, TokenStore
    from runtime.access.tokens import TokenService, Verdict, parse_ttl

_EXPORTS = {
    "AuditRecord": "runtime.access.store",
    "AuditStore": "runtime.access.store",
    "OpsStore": "runtime.access.store",
    "TokenRecord": "runtime.access.store",
    "TokenService": "runtime.access.tokens",
    "TokenStore": "runtime.access.store",
    "Verdict": "runtime.access.tokens",
    "parse_ttl": "runtime.access.tokens",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)

__all__ = [
    "AuditRecord",
    "AuditStore",
    "OpsStore",
    "TokenRecord",
    "TokenService",
    "TokenStore",
    "Verdict",
    "parse_ttl",
]
