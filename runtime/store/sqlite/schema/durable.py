"""Tables of the durable layer (runs, events, checkpoints, leases, effects, interrupts).

A run row carries its own lease (``lease_owner``, ``lease_token``, ``lease_expires``): claiming
bumps ``lease_token`` (the fencing token) and every commit a worker makes is an UPDATE guarded by
``lease_token = ?``, so a worker that lost its lease can never commit. ``visit`` numbers step
executions within a run; effects and interrupts are keyed by it so that a step re-run after an
interrupt or a crash finds its own records and nobody else's.

``lease_host``/``lease_pid``/``lease_started`` name the process holding a running run (prompt
takeover, ``runtime.durable.owner``); ``concurrency_key`` is the group a run counts in under its
workflow's concurrency limit.
"""

from runtime.store.migration import Migration

MIGRATIONS = [
    Migration(
        "0100_durable_runs",
        """
        CREATE TABLE runs (
            id TEXT PRIMARY KEY,
            tenant TEXT NOT NULL,
            project TEXT NOT NULL,
            workflow TEXT NOT NULL,
            plan_hash TEXT NOT NULL,
            session_id TEXT,
            output_session_id TEXT,
            input TEXT NOT NULL,
            status TEXT NOT NULL,
            state TEXT NOT NULL,
            step TEXT,
            visit INTEGER NOT NULL DEFAULT 1,
            attempt INTEGER NOT NULL DEFAULT 1,
            error TEXT,
            idempotency_key TEXT,
            request_hash TEXT NOT NULL,
            deadline REAL,
            next_at REAL NOT NULL,
            lease_owner TEXT,
            lease_token INTEGER NOT NULL DEFAULT 0,
            lease_expires REAL,
            cancel_requested INTEGER NOT NULL DEFAULT 0,
            cancel_reason TEXT,
            last_seq INTEGER NOT NULL DEFAULT 0,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        );
        CREATE UNIQUE INDEX runs_idempotency ON runs (tenant, project, idempotency_key)
            WHERE idempotency_key IS NOT NULL;
        CREATE INDEX runs_ready ON runs (status, next_at);
        CREATE INDEX runs_scope ON runs (tenant, project, id);
        CREATE TABLE run_events (
            run_id TEXT NOT NULL REFERENCES runs(id),
            seq INTEGER NOT NULL,
            type TEXT NOT NULL,
            data TEXT NOT NULL,
            created_at REAL NOT NULL,
            PRIMARY KEY (run_id, seq)
        ) WITHOUT ROWID;
        CREATE TABLE run_checkpoints (
            run_id TEXT NOT NULL REFERENCES runs(id),
            seq INTEGER NOT NULL,
            state TEXT NOT NULL,
            next_step TEXT,
            pending TEXT NOT NULL,
            created_at REAL NOT NULL,
            PRIMARY KEY (run_id, seq)
        ) WITHOUT ROWID;
        CREATE TABLE run_interrupts (
            id TEXT PRIMARY KEY,
            run_id TEXT NOT NULL REFERENCES runs(id),
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
            expires_at REAL,
            created_at REAL NOT NULL,
            decided_at REAL,
            UNIQUE (run_id, visit, ordinal)
        );
        CREATE INDEX run_interrupts_pending ON run_interrupts (status, expires_at);
        CREATE TABLE run_effects (
            id TEXT PRIMARY KEY,
            run_id TEXT NOT NULL REFERENCES runs(id),
            tenant TEXT NOT NULL,
            project TEXT NOT NULL,
            step TEXT NOT NULL,
            visit INTEGER NOT NULL,
            key TEXT NOT NULL,
            effect_class TEXT NOT NULL,
            status TEXT NOT NULL,
            result TEXT,
            error TEXT,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            UNIQUE (run_id, visit, key)
        );
        CREATE INDEX run_effects_status ON run_effects (tenant, project, status);
        """,
    ),
    Migration(
        "0101_durable_lease_losses",
        """
        ALTER TABLE runs ADD COLUMN lost_leases INTEGER NOT NULL DEFAULT 0;
        """,
    ),
    Migration(
        "0110_durable_claims",
        """
        ALTER TABLE runs ADD COLUMN lease_host TEXT;
        ALTER TABLE runs ADD COLUMN lease_pid INTEGER;
        ALTER TABLE runs ADD COLUMN lease_started INTEGER;
        ALTER TABLE runs ADD COLUMN concurrency_key TEXT;
        """,
    ),
    Migration(
        "0111_durable_results_and_forks",
        """
        ALTER TABLE runs ADD COLUMN result TEXT;
        ALTER TABLE runs ADD COLUMN forked_from TEXT;
        ALTER TABLE runs ADD COLUMN forked_from_seq INTEGER;
        ALTER TABLE run_checkpoints ADD COLUMN session_id TEXT;
        """,
    ),
    Migration(
        "0112_durable_checkpoints_on_events",
        # A checkpoint is kept on the event it belongs to (its ``checkpoint.created``), not in a table of
        # its own: a step's commit then writes one B-tree page less, and in WAL mode with
        # synchronous=FULL the fsync a step waits for costs about what the pages it carries do.
        """
        ALTER TABLE run_events ADD COLUMN cp_state TEXT;
        ALTER TABLE run_events ADD COLUMN cp_next_step TEXT;
        ALTER TABLE run_events ADD COLUMN cp_pending TEXT;
        ALTER TABLE run_events ADD COLUMN cp_session_id TEXT;
        UPDATE run_events SET cp_state = c.state, cp_next_step = c.next_step, cp_pending = c.pending,
            cp_session_id = c.session_id
            FROM run_checkpoints c WHERE c.run_id = run_events.run_id AND c.seq = run_events.seq;
        DROP TABLE run_checkpoints;
        """,
    ),
    Migration(
        "0113_durable_trace_context",
        # The W3C trace context (JSON: traceparent, tracestate) of the span that started the run: every
        # later drive of it, in any process, is a child there (runtime.durable.traced).
        "ALTER TABLE runs ADD COLUMN trace_context TEXT;",
    ),
]
