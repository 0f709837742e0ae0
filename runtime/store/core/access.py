"""The access layer's stores (``runtime.access.store``): tokens, the audit trail, and the reads operations make.

A token is read from its row on every request (one point read by key), so a revocation committed
by any process is seen by the next request of every other one.
"""

from __future__ import annotations

from collections.abc import Sequence

from runtime.access.store import AUDIT_COLUMNS, TOKEN_COLUMNS, AuditRecord, TokenRecord
from runtime.errors import StoreError
from runtime.store.core.dialect import Dialect
from runtime.store.core.statements import Duplicate, Op, Store, many, none, one, rows, unscoped, value

_TOKEN_VALUES = ", ".join("?" * len(TOKEN_COLUMNS.split(",")))
_AUDIT_VALUES = ", ".join("?" * len(AUDIT_COLUMNS.split(",")))


def add_token(d: Dialect, token: TokenRecord) -> Op[None]:
    try:
        yield none(f"INSERT INTO access_tokens ({TOKEN_COLUMNS}) VALUES ({_TOKEN_VALUES})", *token.row())
    except Duplicate as exc:
        raise StoreError(f"a token {token.id} exists already") from exc


def get_token(d: Dialect, token_id: str) -> Op[TokenRecord | None]:
    row = yield one(f"SELECT {TOKEN_COLUMNS} FROM access_tokens WHERE id = ?", token_id)
    return None if row is None else TokenRecord.from_row(row)


def list_tokens(d: Dialect) -> Op[list[TokenRecord]]:
    found = yield rows(f"SELECT {TOKEN_COLUMNS} FROM access_tokens ORDER BY created_at, id")
    return [TokenRecord.from_row(r) for r in found]


def revoke_token(d: Dialect, token_id: str, at: float) -> Op[TokenRecord | None]:
    yield none("UPDATE access_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", at, token_id)
    return (yield from get_token(d, token_id))


def take_rate(d: Dialect, token_id: str, at: float, interval_s: float, tolerance_s: float) -> Op[float]:
    """One request of a rate-limited token, counted in its row (``rate_tat``: the GCRA's theoretical arrival
    time, ``runtime.access.rates``) by one conditional UPDATE, so servers on one store share the count and
    two of them never both take the last place (PostgreSQL re-checks the WHERE on the row it locked)."""
    took = yield one(
        "UPDATE access_tokens SET rate_tat = CASE WHEN rate_tat IS NULL OR rate_tat < ? THEN ? ELSE rate_tat END + ? "
        "WHERE id = ? AND (rate_tat IS NULL OR rate_tat - ? <= ?) RETURNING rate_tat",
        at, at, interval_s, token_id, at, tolerance_s,
    )  # fmt: skip
    if took is not None:
        return 0.0
    tat = yield value("SELECT rate_tat FROM access_tokens WHERE id = ?", token_id)
    return max(1e-3, (float(tat) if tat is not None else at) - tolerance_s - at)  # refused: never "0 s"


def append_audit(d: Dialect, records: Sequence[AuditRecord]) -> Op[None]:
    yield many(f"INSERT INTO audit_log ({AUDIT_COLUMNS}) VALUES ({_AUDIT_VALUES})", [r.row() for r in records])


def recent_audit(d: Dialect, limit: int) -> Op[list[AuditRecord]]:
    found = yield rows("SELECT * FROM audit_log ORDER BY seq DESC LIMIT ?", limit)
    return [AuditRecord.from_row(r) for r in reversed(found)]


def ping(d: Dialect) -> Op[None]:
    yield rows("SELECT 1 FROM schema_migrations LIMIT 1")


def run_counts(d: Dialect) -> Op[dict[str, int]]:
    found = yield rows("SELECT status, count(*) FROM runs GROUP BY status")
    return {r[0]: int(r[1]) for r in found}


def step_durations(d: Dialect, after: float, limit: int) -> Op[list[tuple[float, str, float]]]:
    found = yield rows(
        "SELECT c.created_at, r.workflow, c.created_at - (SELECT max(s.created_at) FROM run_events s"
        "   WHERE s.run_id = c.run_id AND s.seq < c.seq AND s.type = 'step.started')"
        f" FROM run_events c{d.indexed_by('step_completions')} JOIN runs r ON r.id = c.run_id"
        " WHERE c.type = 'step.completed' AND c.created_at > ? ORDER BY c.created_at LIMIT ?",
        after,
        limit,
    )
    return [(float(r[0]), str(r[1]), max(0.0, float(r[2] or 0.0))) for r in found]


class CoreTokenStore(Store):
    add = unscoped(add_token, "write")
    get = unscoped(get_token, "lookup")  # one per request: no thread hop where avoidable
    list = unscoped(list_tokens)
    revoke = unscoped(revoke_token, "write")
    take = unscoped(take_rate, "small")


class CoreAuditStore(Store):
    recent = unscoped(recent_audit)

    async def append(self, records: Sequence[AuditRecord]) -> None:
        if records:
            await self.ex.write(append_audit, records)


class CoreOpsStore(Store):
    run_counts = unscoped(run_counts)
    step_durations = unscoped(step_durations)

    async def ping(self) -> None:
        refused = self.ex.refusal()  # a store that answers reads but refuses writes is not ready
        if refused is not None:
            raise refused
        await self.ex.read(ping)
