"""Run notifications (CONTRACT §15 webhooks): the URL a run notifies, and the outbox of its deliveries.

A ``webhook_deliveries`` row is written in the transaction that settles its run (``runtime.store.core.webhooks``),
so a notification is never lost nor made for a change that rolled back. Its ``next_at`` is when it is due
and, once a sender claimed it, that sender's lease: a sender that dies leaves it due again.
"""

from runtime.store.migration import Migration

MIGRATIONS: list[Migration] = [
    Migration(
        "0600_webhook_deliveries",
        """
        ALTER TABLE runs ADD COLUMN notify_url TEXT;
        CREATE TABLE webhook_deliveries (
            id TEXT PRIMARY KEY,
            run_id TEXT NOT NULL,
            tenant TEXT NOT NULL,
            project TEXT NOT NULL,
            url TEXT NOT NULL,
            event TEXT NOT NULL,
            body TEXT NOT NULL,
            status TEXT NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            next_at REAL NOT NULL,
            expires_at REAL NOT NULL,
            lease_owner TEXT,
            lease_token INTEGER NOT NULL DEFAULT 0,
            last_code INTEGER,
            last_error TEXT,
            last_at REAL,
            created_at REAL NOT NULL
        );
        CREATE INDEX webhook_deliveries_due ON webhook_deliveries (status, next_at);
        CREATE INDEX webhook_deliveries_run ON webhook_deliveries (run_id, created_at);
        """,
    ),
]
