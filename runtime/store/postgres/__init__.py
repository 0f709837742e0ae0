"""The PostgreSQL backend: a shared database (pool, group commit), migrations, LISTEN/NOTIFY
wake-ups and a BM25 index in plain SQL. Needs the ``postgres`` extra (asyncpg)."""

from runtime.store.postgres.database import PostgresDatabase

__all__ = ["PostgresDatabase"]
