"""Team operations (CONTRACT §15): schedules and the ticks they fired, and runs' priority and schedule.

``schedule_ticks`` is the once-only key of a tick: its run is created in the transaction that inserts
it (``runtime.store.core.schedules``). ``runs_priority`` serves claims, highest priority first;
``runs_scope_status`` counts a scope's queued runs (the queued-run quota); fair claims walk the scopes
with queued runs and read each one's head through ``runs_fair`` (``runtime.store.core.claims``).
"""

from runtime.store.core.schema import AddColumn, Index, Step, table

SCHEDULES = table(
    "schedules",
    """
    id           id     key
    tenant       text
    project      text
    name         text   null
    workflow     text
    cron         text
    timezone     text
    catch_up     text
    input        json
    message      text   null
    paused       flag   default 0
    next_at      float
    last_tick    float  null
    created_at   float
    updated_at   float
    """,
)
TICKS = table(
    "schedule_ticks",
    """
    schedule_id   id     key
    tick          big    key
    run_id        id     null
    created_at    float
    """,
)

MIGRATIONS = [
    Step(
        "0500_operations_schedules_priority",
        SCHEDULES,
        Index("schedules_scope", "schedules", "tenant, project, id"),
        Index("schedules_due", "schedules", "paused, next_at"),
        TICKS,
        AddColumn("runs", "schedule_id id null"),
        AddColumn("runs", "priority int default 0"),
        Index("runs_priority", "runs", "status, priority DESC, next_at"),
    ),
    Step("0501_runs_scope_status", Index("runs_scope_status", "runs", "tenant, project, status")),
    Step("0502_runs_fair", Index("runs_fair", "runs", "status, tenant, project, priority DESC, next_at, id")),
]
