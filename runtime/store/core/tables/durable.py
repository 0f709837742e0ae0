"""Tables of the durable layer (runs, events, leases, effects, interrupts).

A run row carries its own lease (``lease_owner``, ``lease_token``, ``lease_expires``): claiming
bumps ``lease_token`` (the fencing token) and every commit a worker makes is an UPDATE guarded by
``lease_token = ?``, so a worker that lost its lease can never commit. ``visit`` numbers step
executions within a run; effects and interrupts are keyed by it so that a step re-run after an
interrupt or a crash finds its own records and nobody else's.

``lease_host``/``lease_pid``/``lease_started`` name the process holding a running run (prompt
takeover, ``runtime.durable.owner``); ``concurrency_key`` is the group a run counts in under its
workflow's concurrency limit. ``trace_context`` is the W3C trace context (JSON: traceparent,
tracestate) of the span that started the run: every later drive of it, in any process, is a child
there (``runtime.durable.traced``).

Checkpoints: on SQLite a checkpoint is kept on the event it belongs to (its ``checkpoint.created``,
columns ``cp_*``), not in a table of its own (0112): a step's commit then writes one B-tree page less,
and in WAL mode with synchronous=FULL the fsync a step waits for costs about what the pages it
carries do. PostgreSQL keeps ``run_checkpoints`` (written in the commit's one statement,
``runtime.store.core.run_rows``).

``run_scopes`` lists the scopes (tenant, project) that have queued runs, so that a fair claim
(``runtime.store.core.claims``) starts from them instead of seeking them in ``runs_fair``, where the
entries of runs claimed since the last vacuum lie in the way. A trigger adds a run's scope whenever
the run becomes queued (created, requeued by the reaper, decided, retried, forked, fired by a
schedule: every path, present and future, without each writing it). Nothing removes a scope in the
same transaction: ``claims.sweep`` drops scopes left with no queued run. On PostgreSQL the trigger
holds a shared transaction lock of the scope, and the sweep drops only scopes whose exclusive lock
it gets (so no uncommitted run is becoming queued there) after looking again under that lock.
"""

from runtime.store.core.schema import AddColumn, Change, Index, Raw, Step, table

RUNS = table(
    "runs",
    """
    id                  id     key
    tenant              text
    project             text
    workflow            text
    plan_hash           text
    session_id          id     null
    output_session_id   id     null
    input               json
    status              text
    state               json
    step                text   null
    visit               int    default 1
    attempt             int    default 1
    error               text   null
    idempotency_key     text   null
    request_hash        text
    deadline            float  null
    next_at             float
    lease_owner         text   null
    lease_token         big    default 0
    lease_expires       float  null
    cancel_requested    flag   default 0
    cancel_reason       text   null
    last_seq            int    default 0
    created_at          float
    updated_at          float
    """,
)
RUN_EVENTS = table(
    "run_events",
    """
    run_id       id     key references runs(id)
    seq          int    key
    type         text
    data         json
    created_at   float
    """,
    without_rowid=True,
)
RUN_CHECKPOINTS = table(
    "run_checkpoints",
    """
    run_id       id     key references runs(id)
    seq          int    key
    state        json
    next_step    text   null
    pending      json
    created_at   float
    """,
    without_rowid=True,
)
#: Columns every record a step keeps of its visit starts with.
VISIT = """
    id             id     key
    run_id         id     references runs(id)
    tenant         text
    project        text
    step           text
    visit          int
"""
RUN_INTERRUPTS = table(
    "run_interrupts",
    VISIT
    + """
    ordinal      int
    kind         text
    prompt       text
    schema       json   null
    status       text
    decision     json   null
    expires_at   float  null
    created_at   float
    decided_at   float  null
    """,
    unique=[("run_id", "visit", "ordinal")],
)
RUN_EFFECTS = table(
    "run_effects",
    VISIT
    + """
    key            text
    effect_class   text
    status         text
    result         json   null
    error          text   null
    created_at     float
    updated_at     float
    """,
    unique=[("run_id", "visit", "key")],
)
CREATED: list[Change] = [
    RUNS,
    Index("runs_idempotency", "runs", "tenant, project, idempotency_key", unique=True,
          where="idempotency_key IS NOT NULL"),
    Index("runs_ready", "runs", "status, next_at"),
    Index("runs_scope", "runs", "tenant, project, id"),
    RUN_EVENTS,
    RUN_CHECKPOINTS,
    RUN_INTERRUPTS,
    Index("run_interrupts_pending", "run_interrupts", "status, expires_at"),
    RUN_EFFECTS,
    Index("run_effects_status", "run_effects", "tenant, project, status"),
]  # fmt: skip
LOST_LEASES = AddColumn("runs", "lost_leases int default 0")
CLAIMS = Step(
    "0110_durable_claims",
    AddColumn("runs", "lease_host text null"),
    AddColumn("runs", "lease_pid int null"),
    AddColumn("runs", "lease_started big null"),
    AddColumn("runs", "concurrency_key text null"),
)
RESULTS_AND_FORKS = Step(
    "0111_durable_results_and_forks",
    AddColumn("runs", "result json null"),
    AddColumn("runs", "forked_from id null"),
    AddColumn("runs", "forked_from_seq int null"),
    AddColumn("run_checkpoints", "session_id id null"),
)
CHECKPOINTS_ON_EVENTS = Step(
    "0112_durable_checkpoints_on_events",
    AddColumn("run_events", "cp_state json null"),
    AddColumn("run_events", "cp_next_step text null"),
    AddColumn("run_events", "cp_pending json null"),
    AddColumn("run_events", "cp_session_id id null"),
    Raw(
        sqlite="""
        UPDATE run_events SET cp_state = c.state, cp_next_step = c.next_step, cp_pending = c.pending,
            cp_session_id = c.session_id
            FROM run_checkpoints c WHERE c.run_id = run_events.run_id AND c.seq = run_events.seq;
        DROP TABLE run_checkpoints;
        """
    ),
)
TRACE_CONTEXT = Step("0113_durable_trace_context", AddColumn("runs", "trace_context json null"))

RUN_SCOPES = table(
    "run_scopes",
    """
    tenant    text   key
    project   text   key
    """,
    without_rowid=True,
)
#: The lock key of a scope's queued runs (``claims.sweep`` takes it too), and the scope's row: a run becomes queued.
SCOPE_LOCK = "hashtextextended('rath-queued-scope/' || {t} || '/' || {p}, 0)"
_QUEUED_SCOPE_PG = f"""
CREATE FUNCTION run_scopes_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared({SCOPE_LOCK.format(t="NEW.tenant", p="NEW.project")});
    INSERT INTO run_scopes (tenant, project) VALUES (NEW.tenant, NEW.project) ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;
CREATE TRIGGER runs_queued_scope AFTER INSERT ON runs FOR EACH ROW WHEN (NEW.status = 'queued')
    EXECUTE FUNCTION run_scopes_add();
CREATE TRIGGER runs_requeued_scope AFTER UPDATE OF status ON runs FOR EACH ROW
    WHEN (NEW.status = 'queued' AND OLD.status <> 'queued') EXECUTE FUNCTION run_scopes_add();
INSERT INTO run_scopes (tenant, project) SELECT DISTINCT tenant, project FROM runs WHERE status = 'queued'
"""
_QUEUED_SCOPE_SQLITE = """
CREATE TRIGGER runs_queued_scope AFTER INSERT ON runs WHEN NEW.status = 'queued' BEGIN
    INSERT OR IGNORE INTO run_scopes (tenant, project) VALUES (NEW.tenant, NEW.project);
END;
CREATE TRIGGER runs_requeued_scope AFTER UPDATE OF status ON runs WHEN NEW.status = 'queued' AND OLD.status <> 'queued'
BEGIN
    INSERT OR IGNORE INTO run_scopes (tenant, project) VALUES (NEW.tenant, NEW.project);
END;
INSERT OR IGNORE INTO run_scopes (tenant, project) SELECT DISTINCT tenant, project FROM runs WHERE status = 'queued'
"""
SCOPES = Step("0114_durable_run_scopes", RUN_SCOPES, Raw(sqlite=_QUEUED_SCOPE_SQLITE, postgres=_QUEUED_SCOPE_PG))

SQLITE = [
    Step("0100_durable_runs", *CREATED),
    Step("0101_durable_lease_losses", LOST_LEASES),
    CLAIMS,
    RESULTS_AND_FORKS,
    CHECKPOINTS_ON_EVENTS,
    TRACE_CONTEXT,
    SCOPES,
]
POSTGRES = [Step("0100_durable", *CREATED, LOST_LEASES), CLAIMS, RESULTS_AND_FORKS, TRACE_CONTEXT, SCOPES]
