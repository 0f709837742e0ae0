"""Who may use a store from afar: bearer tokens and the audit trail.

Knows no HTTP or MCP: ``runtime.access.tokens`` makes and checks token secrets, ``store`` is the
protocol the store core implements for both backends (``runtime/store/core/access.py``).

Every name is imported on first use (``runtime.lazy``): a server without ``--auth token`` never loads the token service.
"""

from typing import TYPE_CHECKING

from runtime.lazy import lazy_namespace

if TYPE_CHECKING:  # the public names, one import each: lazy_namespace reads them (see runtime.lazy)
    from runtime.access.store import AuditRecord as AuditRecord
    from runtime.access.store import AuditStore as AuditStore
    from runtime.access.store import TokenRecord as TokenRecord
    from runtime.access.store import TokenStore as TokenStore
    from runtime.access.tokens import TokenService as TokenService
    from runtime.access.tokens import Verdict as Verdict
    from runtime.access.tokens import parse_ttl as parse_ttl

__getattr__, __dir__, __all__ = lazy_namespace(__name__, __file__)
