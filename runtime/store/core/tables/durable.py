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

SQLITE = [
    Step("0100_durable_runs", *CREATED),
    Step("0101_durable_lease_losses", LOST_LEASES),
    CLAIMS,
    RESULTS_AND_FORKS,
    CHECKPOINTS_ON_EVENTS,
    TRACE_CONTEXT,
]
POSTGRES = [Step("0100_durable", *CREATED, LOST_LEASES), CLAIMS, RESULTS_AND_FORKS, TRACE_CONTEXT]
