"""Run notifications (webhooks), written once: the outbox row a settling run gets, claims and tries.

``settled`` runs inside the transaction that moves a run to a status a person may want to hear of
(waiting on a human, needing review, or ended: ``NOTIFIED``), so the notification is committed with
the change itself, or not at all. The run updates read the ``notify_url`` back in the statement that
changes the row (``run_rows``), so runs without one pay nothing; ``park`` reads it (one indexed read).
Its body is made there and then (the run summary as it is in that transaction) and never changes, so
every try sends the same signed bytes under the same ``webhook-id``.

A claim moves ``next_at`` on by the sender's lease: a sender that dies mid-try leaves the row due
again when the lease runs out, and any sender takes it (``skip_locked``: PostgreSQL senders claim
different rows at once). ``lease_token`` fences the record of a try, as a run's lease does its commits.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from runtime.durable.models import SETTLED, Interrupt, Run
from runtime.durable.store_shared import Scope
from runtime.ids import new_id, now
from runtime.store.core.dialect import Dialect
from runtime.store.core.statements import Op, Row, Store, none, one, rows, unscoped, value
from runtime.webhooks.store import PENDING, Attempt, Delivery

NOTIFIED = SETTLED
"""Statuses whose arrival a run with a ``notify_url`` is notified of."""
TTL_S = 24 * 3600.0
"""A delivery not acknowledged within this long of its run's change is given up."""
MAX_BODY = 64 * 1024
"""Bytes of a body at most: a larger summary is sent without its result (``truncated``: read it with run_get)."""
MAX_ERROR = 2000


def payload(run: Run, at: float) -> str:
    """The body: the Standard Webhooks shape (``type``, ``timestamp``, ``data``), ``data`` the run summary."""
    stamp = datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")
    data: dict[str, Any] = run.summary()
    body = json.dumps({"type": f"run.{run.status}", "timestamp": stamp, "data": data}, ensure_ascii=False)
    if len(body.encode()) <= MAX_BODY:
        return body
    error = data.get("error")
    data = {**data, "result": None, "truncated": True, "error": error[:MAX_ERROR] if error else error}
    data["pending_interrupts"] = [{"interrupt_id": i["id"], "kind": i["kind"]} for i in data["pending_interrupts"]]
    return json.dumps({"type": f"run.{run.status}", "timestamp": stamp, "data": data}, ensure_ascii=False)


def settled(d: Dialect, run_id: str, status: str) -> Op[None]:
    """In the transaction that moved ``run_id`` to ``status``: queue its notification if it asked for one.
    (The run updates of ``run_rows`` read the URL back with the update itself and call ``enqueue``.)"""
    if status not in NOTIFIED:
        return
    url = yield value("SELECT notify_url FROM runs WHERE id = ?", run_id)
    if url is not None:
        yield from enqueue(d, run_id, status, url)


def enqueue(d: Dialect, run_id: str, status: str, url: str) -> Op[None]:
    """Write the notification of ``run_id``'s move to ``status``: its summary as this transaction sees it."""
    row = yield one("SELECT * FROM runs WHERE id = ?", run_id)
    pending = yield rows(
        "SELECT * FROM run_interrupts WHERE run_id = ? AND status = 'pending' ORDER BY created_at", run_id
    )
    run = Run.from_row(row, tuple(Interrupt.from_row(r) for r in pending))
    at = now()
    yield none(
        "INSERT INTO webhook_deliveries (id, run_id, tenant, project, url, event, body, status, next_at, "
        "expires_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        new_id("msg"), run_id, run.tenant, run.project, url, f"run.{status}", payload(run, at), PENDING,
        at, at + TTL_S, at,
    )  # fmt: skip


def has_due(d: Dialect, at: float) -> Op[bool]:
    """A read first, so that senders with nothing to send take no write lock (SQLite has one for all)."""
    found = yield value(
        "SELECT EXISTS (SELECT 1 FROM webhook_deliveries WHERE status = 'pending' AND next_at <= ?)", at
    )
    return bool(found)


def prune(d: Dialect, before: float) -> Op[int]:
    """Forget finished deliveries made before ``before`` (the outbox keeps what is pending for ever)."""
    gone = yield none("DELETE FROM webhook_deliveries WHERE status <> 'pending' AND created_at < ?", before)
    return int(gone or 0)


def claim(d: Dialect, owner: str, at: float, lease_s: float, limit: int) -> Op[list[Row]]:
    found: list[Row] = yield rows(
        "UPDATE webhook_deliveries SET next_at = ?, lease_owner = ?, lease_token = lease_token + 1 "
        "WHERE id IN (SELECT id FROM webhook_deliveries WHERE status = 'pending' AND next_at <= ? "
        f"ORDER BY next_at LIMIT ?{d.skip_locked}) "
        "RETURNING id, run_id, url, event, body, attempts, lease_token, expires_at",
        at + lease_s, owner, at, limit,
    )  # fmt: skip
    return found


def record(d: Dialect, delivery: Delivery, attempt: Attempt) -> Op[bool]:
    error = attempt.error[:MAX_ERROR] if attempt.error else None
    changed = yield none(
        "UPDATE webhook_deliveries SET status = ?, next_at = ?, attempts = attempts + 1, last_code = ?, "
        "last_error = ?, last_at = ?, lease_owner = NULL WHERE id = ? AND lease_token = ? AND status = 'pending'",
        attempt.status, attempt.next_at, attempt.code, error, attempt.at, delivery.id, delivery.token,
    )  # fmt: skip
    return bool(changed)


def last(d: Dialect, scope: Scope, run_id: str) -> Op[dict[str, Any] | None]:
    """The run's latest delivery, as ``run_get`` shows it (``next_at`` only while it is pending)."""
    row = yield one(
        "SELECT id AS webhook_id, event, status, attempts, last_code AS code, last_at AS at, last_error AS error, "
        f"CASE WHEN status = '{PENDING}' THEN next_at END AS next_at FROM webhook_deliveries "
        "WHERE run_id = ? AND tenant = ? AND project = ? ORDER BY created_at DESC, id DESC LIMIT 1",
        run_id, scope.tenant, scope.project,
    )  # fmt: skip
    return None if row is None else dict(row)


class CoreWebhookStore(Store):
    """``WebhookStore`` on a backend's ``Executor``."""

    has_due = unscoped(has_due)
    prune = unscoped(prune, "write")
    record = unscoped(record, "write")
    last = unscoped(last)

    async def claim(self, owner: str, at: float, lease_s: float, limit: int) -> list[Delivery]:
        return [Delivery.from_row(r) for r in await self.ex.write(claim, owner, at, lease_s, limit)]
