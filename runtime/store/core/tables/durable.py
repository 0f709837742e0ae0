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

from runtime.store.core.schema import (
    BIG,
    FLAG,
    FLOAT,
    ID,
    INT,
    JSON,
    TEXT,
    AddColumn,
    Change,
    Col,
    Index,
    Raw,
    Step,
    Table,
)

RUNS = Table(
    "runs",
    [
        Col("id", ID),
        Col("tenant", TEXT),
        Col("project", TEXT),
        Col("workflow", TEXT),
        Col("plan_hash", TEXT),
        Col("session_id", ID, null=True),
        Col("output_session_id", ID, null=True),
        Col("input", JSON),
        Col("status", TEXT),
        Col("state", JSON),
        Col("step", TEXT, null=True),
        Col("visit", INT, default=1),
        Col("attempt", INT, default=1),
        Col("error", TEXT, null=True),
        Col("idempotency_key", TEXT, null=True),
        Col("request_hash", TEXT),
        Col("deadline", FLOAT, null=True),
        Col("next_at", FLOAT),
        Col("lease_owner", TEXT, null=True),
        Col("lease_token", BIG, default=0),
        Col("lease_expires", FLOAT, null=True),
        Col("cancel_requested", FLAG, default=0),
        Col("cancel_reason", TEXT, null=True),
        Col("last_seq", INT, default=0),
        Col("created_at", FLOAT),
        Col("updated_at", FLOAT),
    ],
    key=["id"],
)
RUN_EVENTS = Table(
    "run_events",
    [
        Col("run_id", ID, ref="runs(id)"),
        Col("seq", INT),
        Col("type", TEXT),
        Col("data", JSON),
        Col("created_at", FLOAT),
    ],
    key=["run_id", "seq"],
    without_rowid=True,
)
RUN_CHECKPOINTS = Table(
    "run_checkpoints",
    [
        Col("run_id", ID, ref="runs(id)"),
        Col("seq", INT),
        Col("state", JSON),
        Col("next_step", TEXT, null=True),
        Col("pending", JSON),
        Col("created_at", FLOAT),
    ],
    key=["run_id", "seq"],
    without_rowid=True,
)
#: Columns every record a step keeps of its visit starts with.
VISIT = [
    Col("id", ID),
    Col("run_id", ID, ref="runs(id)"),
    Col("tenant", TEXT),
    Col("project", TEXT),
    Col("step", TEXT),
    Col("visit", INT),
]
RUN_INTERRUPTS = Table(
    "run_interrupts",
    [
        *VISIT,
        Col("ordinal", INT),
        Col("kind", TEXT),
        Col("prompt", TEXT),
        Col("schema", JSON, null=True),
        Col("status", TEXT),
        Col("decision", JSON, null=True),
        Col("expires_at", FLOAT, null=True),
        Col("created_at", FLOAT),
        Col("decided_at", FLOAT, null=True),
    ],
    key=["id"],
    unique=[["run_id", "visit", "ordinal"]],
)
RUN_EFFECTS = Table(
    "run_effects",
    [
        *VISIT,
        Col("key", TEXT),
        Col("effect_class", TEXT),
        Col("status", TEXT),
        Col("result", JSON, null=True),
        Col("error", TEXT, null=True),
        Col("created_at", FLOAT),
        Col("updated_at", FLOAT),
    ],
    key=["id"],
    unique=[["run_id", "visit", "key"]],
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
LOST_LEASES = AddColumn("runs", Col("lost_leases", INT, default=0))
CLAIMS = Step(
    "0110_durable_claims",
    AddColumn("runs", Col("lease_host", TEXT, null=True)),
    AddColumn("runs", Col("lease_pid", INT, null=True)),
    AddColumn("runs", Col("lease_started", BIG, null=True)),
    AddColumn("runs", Col("concurrency_key", TEXT, null=True)),
)
RESULTS_AND_FORKS = Step(
    "0111_durable_results_and_forks",
    AddColumn("runs", Col("result", JSON, null=True)),
    AddColumn("runs", Col("forked_from", ID, null=True)),
    AddColumn("runs", Col("forked_from_seq", INT, null=True)),
    AddColumn("run_checkpoints", Col("session_id", ID, null=True)),
)
CHECKPOINTS_ON_EVENTS = Step(
    "0112_durable_checkpoints_on_events",
    AddColumn("run_events", Col("cp_state", JSON, null=True)),
    AddColumn("run_events", Col("cp_next_step", TEXT, null=True)),
    AddColumn("run_events", Col("cp_pending", JSON, null=True)),
    AddColumn("run_events", Col("cp_session_id", ID, null=True)),
    Raw(
        sqlite="""
        UPDATE run_events SET cp_state = c.state, cp_next_step = c.next_step, cp_pending = c.pending,
            cp_session_id = c.session_id
            FROM run_checkpoints c WHERE c.run_id = run_events.run_id AND c.seq = run_events.seq;
        DROP TABLE run_checkpoints;
        """
    ),
)
TRACE_CONTEXT = Step("0113_durable_trace_context", AddColumn("runs", Col("trace_context", JSON, null=True)))

SQLITE = [
    Step("0100_durable_runs", *CREATED),
    Step("0101_durable_lease_losses", LOST_LEASES),
    CLAIMS,
    RESULTS_AND_FORKS,
    CHECKPOINTS_ON_EVENTS,
    TRACE_CONTEXT,
]
POSTGRES = [Step("0100_durable", *CREATED, LOST_LEASES), CLAIMS, RESULTS_AND_FORKS, TRACE_CONTEXT]
