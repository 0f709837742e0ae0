"""The PostgreSQL tables of sessions, durable runs and memory: today's SQLite tables, in PG's DDL.

A draft the per-layer PostgreSQL stores build on. The tables mirror the SQLite schemas of
``runtime/sessions/schema.py``, ``runtime/durable/schema.py`` and ``runtime/memory/schema.py``
column for column, so queries port over unchanged but for placeholders (``$1`` for ``?``): TEXT
for the JSON columns (the code writes and reads JSON strings; jsonb would reorder their keys),
DOUBLE PRECISION for the float-seconds timestamps, INTEGER 0/1 where SQLite has flags. Since a
PostgreSQL store has no history yet, each layer's migrations so far fold into one. Differences:

- identifiers and URIs are ``COLLATE "C"``: prefix searches are ranges (``id >= lo AND id < hi``)
  that are only right, and only use the index, under byte order; a database created with a
  linguistic collation (en_US.UTF-8) would otherwise sort them differently;
- memory has no FTS5: its search index is ``memory_postings`` (term, item, tf, the item's length)
  plus sharded corpus statistics ``memory_stats``, and BM25 is computed in SQL
  (``runtime.store.postgres.recall``), whose tables ``memory_postings``, ``memory_docs`` and
  ``memory_stats`` come with the memory migration.
"""

from __future__ import annotations

from runtime.store.migration import Migration
from runtime.store.postgres.recall import INDEX_DDL

SESSIONS = [
    Migration(
        "0001_sessions",
        """
        CREATE TABLE segments (
            id TEXT COLLATE "C" PRIMARY KEY,
            tenant TEXT NOT NULL,
            project TEXT NOT NULL,
            parent_id TEXT COLLATE "C" REFERENCES segments(id),
            parent_length INTEGER NOT NULL DEFAULT 0,
            tip INTEGER NOT NULL
        );
        CREATE TABLE chunks (
            segment_id TEXT COLLATE "C" NOT NULL REFERENCES segments(id),
            idx INTEGER NOT NULL,
            tenant TEXT NOT NULL,
            project TEXT NOT NULL,
            uid TEXT NOT NULL,
            kind TEXT NOT NULL,
            content TEXT NOT NULL,
            tool_calls TEXT,
            tool_call_id TEXT,
            name TEXT,
            PRIMARY KEY (segment_id, idx)
        );
        CREATE TABLE sessions (
            id TEXT COLLATE "C" PRIMARY KEY,
            tenant TEXT NOT NULL,
            project TEXT NOT NULL,
            op TEXT NOT NULL,
            segment_id TEXT COLLATE "C" REFERENCES segments(id),
            length INTEGER NOT NULL,
            placement TEXT NOT NULL,
            usage TEXT NOT NULL,
            metadata TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            stub INTEGER NOT NULL DEFAULT 0,
            own_usage TEXT,
            chars INTEGER
        );
        CREATE INDEX sessions_scope ON sessions (tenant, project, stub, id);
        CREATE TABLE session_parents (
            child_id TEXT COLLATE "C" NOT NULL REFERENCES sessions(id),
            ord INTEGER NOT NULL,
            parent_id TEXT COLLATE "C" NOT NULL,
            PRIMARY KEY (child_id, ord)
        );
        CREATE INDEX session_parents_parent ON session_parents (parent_id);
        """,
    ),
    # A merge asks whether its first branch holds a chunk by identity, without reading that branch.
    Migration("0002_chunk_uids", "CREATE INDEX chunks_uid ON chunks (uid);"),
    # A session's longest chunk in characters, as on SQLite (0005): the session store is written once.
    Migration("0003_session_widest", "ALTER TABLE sessions ADD COLUMN widest INTEGER;"),
    # Each chunk's trust, as on SQLite (0006): NULL in older rows, read as the kind's default.
    Migration("0006_chunk_trust", "ALTER TABLE chunks ADD COLUMN trust TEXT;"),
]

DURABLE = [
    Migration(
        "0100_durable",
        """
        CREATE TABLE runs (
            id TEXT COLLATE "C" PRIMARY KEY,
            tenant TEXT NOT NULL,
            project TEXT NOT NULL,
            workflow TEXT NOT NULL,
            plan_hash TEXT NOT NULL,
            session_id TEXT COLLATE "C",
            output_session_id TEXT COLLATE "C",
            input TEXT NOT NULL,
            status TEXT NOT NULL,
            state TEXT NOT NULL,
            step TEXT,
            visit INTEGER NOT NULL DEFAULT 1,
            attempt INTEGER NOT NULL DEFAULT 1,
            error TEXT,
            idempotency_key TEXT,
            request_hash TEXT NOT NULL,
            deadline DOUBLE PRECISION,
            next_at DOUBLE PRECISION NOT NULL,
            lease_owner TEXT,
            lease_token BIGINT NOT NULL DEFAULT 0,
            lease_expires DOUBLE PRECISION,
            cancel_requested INTEGER NOT NULL DEFAULT 0,
            cancel_reason TEXT,
            last_seq INTEGER NOT NULL DEFAULT 0,
            created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL,
            lost_leases INTEGER NOT NULL DEFAULT 0
        );
        CREATE UNIQUE INDEX runs_idempotency ON runs (tenant, project, idempotency_key)
            WHERE idempotency_key IS NOT NULL;
        CREATE INDEX runs_ready ON runs (status, next_at);
        CREATE INDEX runs_scope ON runs (tenant, project, id);
        CREATE TABLE run_events (
            run_id TEXT COLLATE "C" NOT NULL REFERENCES runs(id),
            seq INTEGER NOT NULL,
            type TEXT NOT NULL,
            data TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (run_id, seq)
        );
        CREATE TABLE run_checkpoints (
            run_id TEXT COLLATE "C" NOT NULL REFERENCES runs(id),
            seq INTEGER NOT NULL,
            state TEXT NOT NULL,
            next_step TEXT,
            pending TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (run_id, seq)
        );
        CREATE TABLE run_interrupts (
            id TEXT COLLATE "C" PRIMARY KEY,
            run_id TEXT COLLATE "C" NOT NULL REFERENCES runs(id),
            tenant TEXT NOT NULL,
            project TEXT NOT NULL,
            step TEXT NOT NULL,
            visit INTEGER NOT NULL,
            ordinal INTEGER NOT NULL,
            kind TEXT NOT NULL,
            prompt TEXT NOT NULL,
            schema TEXT,
            status TEXT NOT NULL,
            decision TEXT,
            expires_at DOUBLE PRECISION,
            created_at DOUBLE PRECISION NOT NULL,
            decided_at DOUBLE PRECISION,
            UNIQUE (run_id, visit, ordinal)
        );
        CREATE INDEX run_interrupts_pending ON run_interrupts (status, expires_at);
        CREATE TABLE run_effects (
            id TEXT COLLATE "C" PRIMARY KEY,
            run_id TEXT COLLATE "C" NOT NULL REFERENCES runs(id),
            tenant TEXT NOT NULL,
            project TEXT NOT NULL,
            step TEXT NOT NULL,
            visit INTEGER NOT NULL,
            key TEXT NOT NULL,
            effect_class TEXT NOT NULL,
            status TEXT NOT NULL,
            result TEXT,
            error TEXT,
            created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL,
            UNIQUE (run_id, visit, key)
        );
        CREATE INDEX run_effects_status ON run_effects (tenant, project, status);
        """,
    ),
    Migration(
        "0110_durable_claims",
        """
        ALTER TABLE runs ADD COLUMN lease_host TEXT;
        ALTER TABLE runs ADD COLUMN lease_pid INTEGER;
        ALTER TABLE runs ADD COLUMN lease_started BIGINT;
        ALTER TABLE runs ADD COLUMN concurrency_key TEXT;
        """,
    ),
    Migration(
        "0111_durable_results_and_forks",
        """
        ALTER TABLE runs ADD COLUMN result TEXT;
        ALTER TABLE runs ADD COLUMN forked_from TEXT COLLATE "C";
        ALTER TABLE runs ADD COLUMN forked_from_seq INTEGER;
        ALTER TABLE run_checkpoints ADD COLUMN session_id TEXT COLLATE "C";
        """,
    ),
    # The W3C trace context (JSON: traceparent, tracestate) of the span that started the run.
    Migration("0113_durable_trace_context", "ALTER TABLE runs ADD COLUMN trace_context TEXT;"),
]

MEMORY = [
    Migration(
        "0200_memory",
        """
        CREATE TABLE memory_spaces (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            tenant TEXT NOT NULL,
            project TEXT NOT NULL,
            UNIQUE (tenant, project)
        );
        CREATE TABLE memory_items (
            seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id TEXT COLLATE "C" NOT NULL UNIQUE,
            space_id BIGINT NOT NULL REFERENCES memory_spaces(id),
            tenant TEXT NOT NULL,
            project TEXT NOT NULL,
            scope TEXT NOT NULL,
            uri TEXT COLLATE "C" NOT NULL,
            content TEXT NOT NULL,
            tags TEXT NOT NULL,
            source TEXT,
            created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL,
            digest TEXT,
            UNIQUE (tenant, project, uri)
        );
        CREATE INDEX memory_items_source ON memory_items (tenant, project, source);
        CREATE INDEX memory_items_digest ON memory_items (tenant, project, scope, digest);
        CREATE INDEX memory_items_scope_id ON memory_items (tenant, project, id);
        """
        + INDEX_DDL,
    ),
    Migration(
        "0201_memory_vectors",
        """
        CREATE TABLE memory_vectors (
            seq BIGINT PRIMARY KEY,
            space_id BIGINT NOT NULL,
            model TEXT NOT NULL,
            digest TEXT NOT NULL,
            scale DOUBLE PRECISION NOT NULL,
            vec BYTEA NOT NULL,
            stamp BIGINT NOT NULL
        );
        CREATE INDEX memory_vectors_space ON memory_vectors (space_id, model, stamp);
        """,
    ),
]
"""Items, spaces and the BM25 index; then the items' vectors (``runtime.store.core.vectors``): int8
bytes and a scale, stamped with the writer's transaction id, which readers page by."""

ACCESS = [
    Migration(
        "0300_access_tokens_audit",
        """
        CREATE TABLE access_tokens (
            id TEXT COLLATE "C" PRIMARY KEY,
            name TEXT,
            tenant TEXT NOT NULL,
            project TEXT NOT NULL,
            grants TEXT NOT NULL,
            salt BYTEA NOT NULL,
            digest BYTEA NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            expires_at DOUBLE PRECISION,
            revoked_at DOUBLE PRECISION
        );
        CREATE TABLE audit_log (
            seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            at DOUBLE PRECISION NOT NULL,
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
"""Tokens (hashes only), the audit trail, and a partial index for the metrics' step durations."""

ARTIFACTS = [
    Migration(
        "0400_artifacts",
        """
        CREATE TABLE artifacts (
            id TEXT COLLATE "C" PRIMARY KEY,
            tenant TEXT NOT NULL,
            project TEXT NOT NULL,
            name TEXT NOT NULL,
            size BIGINT NOT NULL,
            sha256 TEXT NOT NULL,
            mime_type TEXT NOT NULL,
            session_id TEXT COLLATE "C",
            run_id TEXT COLLATE "C",
            created_at DOUBLE PRECISION NOT NULL
        );
        CREATE INDEX artifacts_scope ON artifacts (tenant, project, id);
        CREATE INDEX artifacts_content ON artifacts (tenant, project, sha256);
        CREATE INDEX artifacts_session ON artifacts (tenant, project, session_id, id);
        CREATE INDEX artifacts_run ON artifacts (tenant, project, run_id, id);
        """,
    ),
    Migration(
        "0401_artifact_deletions",
        """
        CREATE TABLE artifact_deletions (
            tenant TEXT NOT NULL,
            project TEXT NOT NULL,
            sha256 TEXT NOT NULL,
            token TEXT NOT NULL,
            at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (tenant, project, sha256, token)
        );
        """,
    ),
]
"""Artifact metadata (the bytes are in the blob store, ``runtime.artifacts``), as on SQLite."""

OPERATIONS = [
    Migration(
        "0500_operations_schedules_priority",
        """
        CREATE TABLE schedules (
            id TEXT COLLATE "C" PRIMARY KEY,
            tenant TEXT NOT NULL,
            project TEXT NOT NULL,
            name TEXT,
            workflow TEXT NOT NULL,
            cron TEXT NOT NULL,
            timezone TEXT NOT NULL,
            catch_up TEXT NOT NULL,
            input TEXT NOT NULL,
            message TEXT,
            paused INTEGER NOT NULL DEFAULT 0,
            next_at DOUBLE PRECISION NOT NULL,
            last_tick DOUBLE PRECISION,
            created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL
        );
        CREATE INDEX schedules_scope ON schedules (tenant, project, id);
        CREATE INDEX schedules_due ON schedules (paused, next_at);
        CREATE TABLE schedule_ticks (
            schedule_id TEXT COLLATE "C" NOT NULL,
            tick BIGINT NOT NULL,
            run_id TEXT COLLATE "C",
            created_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (schedule_id, tick)
        );
        ALTER TABLE runs ADD COLUMN schedule_id TEXT COLLATE "C";
        ALTER TABLE runs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
        CREATE INDEX runs_priority ON runs (status, priority DESC, next_at);
        """,
    ),
    Migration("0501_runs_scope_status", "CREATE INDEX runs_scope_status ON runs (tenant, project, status);"),
]
"""Team operations (CONTRACT §15): schedules, the once-only key of each tick, runs' schedule and priority."""

WEBHOOKS = [
    Migration(
        "0600_webhook_deliveries",
        """
        ALTER TABLE runs ADD COLUMN notify_url TEXT;
        CREATE TABLE webhook_deliveries (
            id TEXT COLLATE "C" PRIMARY KEY,
            run_id TEXT COLLATE "C" NOT NULL,
            tenant TEXT NOT NULL,
            project TEXT NOT NULL,
            url TEXT NOT NULL,
            event TEXT NOT NULL,
            body TEXT NOT NULL,
            status TEXT NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            next_at DOUBLE PRECISION NOT NULL,
            expires_at DOUBLE PRECISION NOT NULL,
            lease_owner TEXT,
            lease_token BIGINT NOT NULL DEFAULT 0,
            last_code INTEGER,
            last_error TEXT,
            last_at DOUBLE PRECISION,
            created_at DOUBLE PRECISION NOT NULL
        );
        CREATE INDEX webhook_deliveries_due ON webhook_deliveries (status, next_at);
        CREATE INDEX webhook_deliveries_run ON webhook_deliveries (run_id, created_at);
        """,
    ),
]
"""Run notifications (CONTRACT §15 webhooks): runs' notify URL and the outbox of deliveries, as on SQLite."""

ALL = [*SESSIONS, *DURABLE, *MEMORY, *ACCESS, *ARTIFACTS, *OPERATIONS, *WEBHOOKS]
"""Every PostgreSQL migration, in the order they apply (names are never reused or reordered)."""
