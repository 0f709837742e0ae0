"""The PostgreSQL backend: a shared database (pool, group commit), migrations, LISTEN/NOTIFY
wake-ups and a BM25 index in plain SQL. Needs the ``postgres`` extra (asyncpg)."""

from runtime.store.migration import Migration
from runtime.store.postgres.database import PostgresDatabase
from runtime.store.postgres.faults import AmbiguousCommitError
from runtime.store.postgres.migrations import MigrationsPending
from runtime.store.postgres.notify import Notification, Notifier, Subscription, notify

__all__ = [
    "AmbiguousCommitError",
    "Migration",
    "MigrationsPending",
    "Notification",
    "Notifier",
    "PostgresDatabase",
    "Subscription",
    "notify",
]
