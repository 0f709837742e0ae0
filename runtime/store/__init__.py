"""Where a runtime keeps its state: store URLs and the backends that open them.

Each layer owns the protocol of its store (``runtime.sessions.store.SessionStore``,
``runtime.durable.store.RunStore``, ``runtime.memory.store.MemoryStore``); every store's rules,
SQL and tables are written once in ``runtime/store/core`` and run by a backend
(``runtime/store/sqlite/``, ``runtime/store/postgres/``), which keeps only its connection,
transactions, notifications and dialect. This package knows none of the layers: it only finds the backend a
URL names (``BACKENDS``) and hands it the URL. A backend module provides::

    async def open(url: StoreURL, *, synchronous: str) -> Backend  # .sessions/.runs/.memory(tenant, project), .close()
    async def pending(url: StoreURL) -> list[str]                  # migrations not applied yet
    async def migrate(url: StoreURL) -> list[str]                  # apply them; the names applied

(``Backend`` is ``runtime.backend.StoreBackend``, typed with the layers' protocols.)
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from runtime.errors import InvalidInputError
from runtime.extras import require_extra
from runtime.store.url import BACKENDS, DB_FILE, StoreURL, default_url, parse_store_url, redact, resolve_store

#: scheme -> (its driver's module, the extra that installs it), for the backends an extra brings.
DRIVERS: dict[str, tuple[str, str]] = {"postgresql": ("asyncpg", "postgres")}


def backend_module(url: StoreURL) -> ModuleType:
    """The module implementing ``url``'s backend; a clear error for one not in this build or not installed."""
    name = BACKENDS.get(url.scheme)
    if name is None:
        raise InvalidInputError(
            f"the {url.scheme} store ({url}) is not available yet in this build; "
            f"use sqlite:///ABSOLUTE/PATH.db, or leave --store out for {DB_FILE} under the home"
        )
    if url.scheme in DRIVERS:
        require_extra(*DRIVERS[url.scheme])  # a missing extra is named before the backend imports its driver
    return importlib.import_module(name)


async def open_backend(url: StoreURL, *, synchronous: str = "FULL") -> Any:
    """Open (and, where the backend does that on open, migrate) the store at ``url``."""
    return await backend_module(url).open(url, synchronous=synchronous)


async def pending_migrations(url: StoreURL) -> list[str]:
    names: list[str] = await backend_module(url).pending(url)
    return names


async def apply_migrations(url: StoreURL) -> list[str]:
    names: list[str] = await backend_module(url).migrate(url)
    return names


__all__ = [
    "BACKENDS",
    "StoreURL",
    "apply_migrations",
    "backend_module",
    "default_url",
    "open_backend",
    "parse_store_url",
    "pending_migrations",
    "redact",
    "resolve_store",
]
