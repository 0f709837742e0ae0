"""Store URLs: which backend holds a runtime's state, and where.

``sqlite:///ABSOLUTE/PATH.db`` (the embedded default is ``rath.db`` under the home) or
``postgresql://user@host:port/dbname``. Backends are registered by scheme in ``BACKENDS``: a module
name, or None for a scheme known but not built into this build (its URL gets a clear error).
A URL is never echoed with its password.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from runtime.errors import InvalidInputError

DB_FILE = "rath.db"
FORMS = "sqlite:///ABSOLUTE/PATH.db or postgresql://user@host:port/dbname"

#: scheme -> the module implementing it (see ``runtime.store.open_backend``); None: not in this build.
BACKENDS: dict[str, str | None] = {
    "sqlite": "runtime.store.sqlite.backend",
    "postgresql": "runtime.store.postgres.backend",
}
_ALIASES = {"postgres": "postgresql"}


@dataclass(frozen=True)
class StoreURL:
    """A parsed store URL: its backend's scheme, the URL as given, and (SQLite) the database file.

    ``read_only``: the opener only reads (``rath-mcp sessions list``...). A SQLite file this process
    may not write (a read-only mount) is then opened for reading instead of refused; one it may write
    opens, and migrates itself, as usual. Set it with ``dataclasses.replace``.
    """

    scheme: str
    url: str
    path: Path | None = None
    read_only: bool = False

    def __str__(self) -> str:
        return redact(self.url)


def redact(url: str) -> str:
    """``url`` with any password replaced by ``***`` (for messages and logs)."""
    return re.sub(r"^([a-zA-Z][\w+.-]*://[^/@:]*):[^/@]*@", r"\1:***@", url)


def default_url(home: Path) -> StoreURL:
    path = home / DB_FILE
    return StoreURL("sqlite", f"sqlite://{path}", path)


def parse_store_url(url: str) -> StoreURL:
    """Check a store URL; ``InvalidInputError`` naming the accepted forms when it is not one."""
    bad = InvalidInputError(f"store URL {redact(url)!r} is not one rath-mcp can open; use {FORMS}")
    scheme, sep, rest = url.partition("://")
    scheme = _ALIASES.get(scheme.lower(), scheme.lower())
    if not sep or scheme not in BACKENDS:
        raise bad
    if scheme == "sqlite":
        path = Path(rest)
        if not rest.startswith("/") or "?" in rest or "#" in rest or path.name in ("", ".", ".."):
            raise InvalidInputError(
                f"store URL {redact(url)!r} must name an absolute database file, as in sqlite:///ABSOLUTE/PATH.db"
            )
        path = Path("/" + rest.lstrip("/"))
        return StoreURL("sqlite", f"sqlite://{path}", path)
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError:
        raise bad from None
    if not parts.hostname or not parts.path.strip("/"):
        raise InvalidInputError(
            f"store URL {redact(url)!r} needs a host and a database: postgresql://user@host:port/dbname"
        )
    return StoreURL(scheme, url)


def resolve_store(store: str | StoreURL | None, home: Path) -> StoreURL:
    """The store a runtime of ``home`` opens: ``store`` if given, else ``rath.db`` under the home."""
    if store is None:
        return default_url(home)
    if isinstance(store, StoreURL):
        return store
    return parse_store_url(store)
