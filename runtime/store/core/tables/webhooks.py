"""Run notifications (CONTRACT §15 webhooks): the URL a run notifies, and the outbox of its deliveries.

A ``webhook_deliveries`` row is written in the transaction that settles its run (``runtime.store.core.webhooks``),
so a notification is never lost nor made for a change that rolled back. Its ``next_at`` is when it is due
and, once a sender claimed it, that sender's lease: a sender that dies leaves it due again.
"""

from runtime.store.core.schema import BIG, FLOAT, ID, INT, TEXT, AddColumn, Col, Index, Step, Table

DELIVERIES = Table(
    "webhook_deliveries",
    [
        Col("id", ID),
        Col("run_id", ID),
        Col("tenant", TEXT),
        Col("project", TEXT),
        Col("url", TEXT),
        Col("event", TEXT),
        Col("body", TEXT),
        Col("status", TEXT),
        Col("attempts", INT, default=0),
        Col("next_at", FLOAT),
        Col("expires_at", FLOAT),
        Col("lease_owner", TEXT, null=True),
        Col("lease_token", BIG, default=0),
        Col("last_code", INT, null=True),
        Col("last_error", TEXT, null=True),
        Col("last_at", FLOAT, null=True),
        Col("created_at", FLOAT),
    ],
    key=["id"],
)

MIGRATIONS = [
    Step(
        "0600_webhook_deliveries",
        AddColumn("runs", Col("notify_url", TEXT, null=True)),
        DELIVERIES,
        Index("webhook_deliveries_due", "webhook_deliveries", "status, next_at"),
        Index("webhook_deliveries_run", "webhook_deliveries", "run_id, created_at"),
    ),
]
