"""Tables of the access layer: bearer tokens (hashes only) and the audit trail.

``step_completions`` is a partial index over the durable layer's events, for the metrics'
step durations: only ``step.completed`` rows enter it, so other events pay nothing for it.
"""

from runtime.store.core.schema import BYTES, COUNTER, FLOAT, ID, INT, JSON, TEXT, AddColumn, Col, Index, Step, Table

TOKENS = Table(
    "access_tokens",
    [
        Col("id", ID),
        Col("name", TEXT, null=True),
        Col("tenant", TEXT),
        Col("project", TEXT),
        Col("grants", JSON),
        Col("salt", BYTES),
        Col("digest", BYTES),
        Col("created_at", FLOAT),
        Col("expires_at", FLOAT, null=True),
        Col("revoked_at", FLOAT, null=True),
    ],
    key=["id"],
)
AUDIT = Table(
    "audit_log",
    [
        Col("seq", COUNTER),
        Col("at", FLOAT),
        Col("actor", TEXT),
        Col("method", TEXT, null=True),
        Col("tenant", TEXT, null=True),
        Col("project", TEXT, null=True),
        Col("action", TEXT),
        Col("targets", JSON),
        Col("outcome", TEXT),
        Col("reason", TEXT, null=True),
    ],
)
STEP_COMPLETIONS = Index("step_completions", "run_events", "created_at", where="type = 'step.completed'")

#: A token's rate limit (``token create --rate --burst``) and its count: the GCRA's theoretical arrival
#: time, moved by each request on any server of the store (``runtime.access.rates``).
RATES = Step(
    "0301_access_token_rates",
    AddColumn("access_tokens", Col("rate", FLOAT, null=True)),
    AddColumn("access_tokens", Col("burst", INT, null=True)),
    AddColumn("access_tokens", Col("rate_tat", FLOAT, null=True)),
)

MIGRATIONS = [Step("0300_access_tokens_audit", TOKENS, AUDIT, STEP_COMPLETIONS), RATES]
