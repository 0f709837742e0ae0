"""Team operations (CONTRACT §15): schedules and the ticks they fired, and runs' priority and schedule.

``schedule_ticks`` is the once-only key of a tick: its run is created in the transaction that inserts
it (``runtime.store.core.schedules``). ``runs_priority`` serves claims, highest priority first;
``runs_scope_status`` counts a scope's queued runs (the queued-run quota); fair claims walk the scopes
with queued runs and read each one's head through ``runs_fair`` (``runtime.store.core.claims``).
"""

from runtime.store.core.schema import BIG, FLAG, FLOAT, ID, INT, JSON, TEXT, AddColumn, Col, Index, Step, Table

SCHEDULES = Table(
    "schedules",
    [
        Col("id", ID),
        Col("tenant", TEXT),
        Col("project", TEXT),
        Col("name", TEXT, null=True),
        Col("workflow", TEXT),
        Col("cron", TEXT),
        Col("timezone", TEXT),
        Col("catch_up", TEXT),
        Col("input", JSON),
        Col("message", TEXT, null=True),
        Col("paused", FLAG, default=0),
        Col("next_at", FLOAT),
        Col("last_tick", FLOAT, null=True),
        Col("created_at", FLOAT),
        Col("updated_at", FLOAT),
    ],
    key=["id"],
)
TICKS = Table(
    "schedule_ticks",
    [Col("schedule_id", ID), Col("tick", BIG), Col("run_id", ID, null=True), Col("created_at", FLOAT)],
    key=["schedule_id", "tick"],
)

MIGRATIONS = [
    Step(
        "0500_operations_schedules_priority",
        SCHEDULES,
        Index("schedules_scope", "schedules", "tenant, project, id"),
        Index("schedules_due", "schedules", "paused, next_at"),
        TICKS,
        AddColumn("runs", Col("schedule_id", ID, null=True)),
        AddColumn("runs", Col("priority", INT, default=0)),
        Index("runs_priority", "runs", "status, priority DESC, next_at"),
    ),
    Step("0501_runs_scope_status", Index("runs_scope_status", "runs", "tenant, project, status")),
    Step("0502_runs_fair", Index("runs_fair", "runs", "status, tenant, project, priority DESC, next_at, id")),
]
