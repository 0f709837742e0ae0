"""Tables of the access layer: bearer tokens (hashes only) and the audit trail.

``step_completions`` is a partial index over the durable layer's events, for the metrics'
step durations: only ``step.completed`` rows enter it, so other events pay nothing for it.
"""

from runtime.store.migration import Migration

MIGRATIONS: list[Migration] = [
    Migration(
        "0300_access_tokens_audit",
        """
        CREATE TABLE access_tokens (
            id TEXT PRIMARY KEY,
            name TEXT,
            tenant TEXT NOT NULL,
            project TEXT NOT NULL,
            grants TEXT NOT NULL,
            salt BLOB NOT NULL,
            digest BLOB NOT NULL,
            created_at REAL NOT NULL,
            expires_at REAL,
            revoked_at REAL
        );
        CREATE TABLE audit_log (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            at REAL NOT NULL,
            actor TEXT NOT NULL,
            method TEXT,
            tenant TEXT,
            project TEXT,
            action TEXT NOT NULL,
            targets TEXT NOT NULL,
            outcome TEXT NOT NULL,
            reason TEXT
        );
        CREATE INDEX step_completions ON run_events (created_at) WHERE type = 'step.completed';
        """,
    ),
]
