"""Tables of the access layer: bearer tokens (hashes only) and the audit trail.

``step_completions`` is a partial index over the durable layer's events, for the metrics'
step durations: only ``step.completed`` rows enter it, so other events pay nothing for it.
"""

from runtime.store.core.schema import AddColumn, Index, Step, table

TOKENS = table(
    "access_tokens",
    """
    id           id     key
    name         text   null
    tenant       text
    project      text
    grants       json
    salt         bytes
    digest       bytes
    created_at   float
    expires_at   float  null
    revoked_at   float  null
    """,
)
AUDIT = table(
    "audit_log",
    """
    seq       counter
    at        float
    actor     text
    method    text   null
    tenant    text   null
    project   text   null
    action    text
    targets   json
    outcome   text
    reason    text   null
    """,
)
STEP_COMPLETIONS = Index("step_completions", "run_events", "created_at", where="type = 'step.completed'")

#: A token's rate limit (``token create --rate --burst``) and its count: the GCRA's theoretical arrival
#: time, moved by each request on any server of the store (``runtime.access.rates``).
RATES = Step(
    "0301_access_token_rates",
    AddColumn("access_tokens", "rate float null"),
    AddColumn("access_tokens", "burst int null"),
    AddColumn("access_tokens", "rate_tat float null"),
)

MIGRATIONS = [Step("0300_access_tokens_audit", TOKENS, AUDIT, STEP_COMPLETIONS), RATES]
