"""Run notifications (CONTRACT §15 webhooks): the URL a run notifies, and the outbox of its deliveries.

A ``webhook_deliveries`` row is written in the transaction that settles its run (``runtime.store.core.webhooks``),
so a notification is never lost nor made for a change that rolled back. Its ``next_at`` is when it is due
and, once a sender claimed it, that sender's lease: a sender that dies leaves it due again.
"""

from runtime.store.core.schema import AddColumn, Index, Step, table

DELIVERIES = table(
    "webhook_deliveries",
    """
    id            id     key
    run_id        id
    tenant        text
    project       text
    url           text
    event         text
    body          text
    status        text
    attempts      int    default 0
    next_at       float
    expires_at    float
    lease_owner   text   null
    lease_token   big    default 0
    last_code     int    null
    last_error    text   null
    last_at       float  null
    created_at    float
    """,
)

MIGRATIONS = [
    Step(
        "0600_webhook_deliveries",
        AddColumn("runs", "notify_url text null"),
        DELIVERIES,
        Index("webhook_deliveries_due", "webhook_deliveries", "status, next_at"),
        Index("webhook_deliveries_run", "webhook_deliveries", "run_id, created_at"),
    ),
]
