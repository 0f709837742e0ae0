"""Team operations (CONTRACT §15): schedules and the ticks they fired, and runs' priority and schedule.

``schedule_ticks`` is the once-only key of a tick: its run is created in the transaction that inserts
it (``runtime.store.core.schedules``). ``runs_priority`` serves claims, highest priority first.
"""

from runtime.store.migration import Migration

MIGRATIONS: list[Migration] = [
    Migration(
        "0500_operations_schedules_priority",
        """
        CREATE TABLE schedules (
            id TEXT PRIMARY KEY,
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
            next_at REAL NOT NULL,
            last_tick REAL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        );
        CREATE INDEX schedules_scope ON schedules (tenant, project, id);
        CREATE INDEX schedules_due ON schedules (paused, next_at);
        CREATE TABLE schedule_ticks (
            schedule_id TEXT NOT NULL,
            tick INTEGER NOT NULL,
            run_id TEXT,
            created_at REAL NOT NULL,
            PRIMARY KEY (schedule_id, tick)
        );
        ALTER TABLE runs ADD COLUMN schedule_id TEXT;
        ALTER TABLE runs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
        CREATE INDEX runs_priority ON runs (status, priority DESC, next_at);
        """,
    ),
    Migration("0501_runs_scope_status", "CREATE INDEX runs_scope_status ON runs (tenant, project, status);"),
]
