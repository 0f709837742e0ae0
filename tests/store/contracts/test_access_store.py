"""The access stores' contract (tokens, audit, operations), run on SQLite and PostgreSQL.

Tokens are checked through ``TokenService`` (what the HTTP layer uses): only a hash is stored, a
revocation made through another backend object on the same store (another process, as far as
the store can tell) refuses the token on the very next check, and expiry follows the clock.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from runtime.access import AuditRecord, TokenService
from runtime.backend import StoreBackend
from runtime.durable.store import NewRun, StepCommit
from runtime.errors import InvalidInputError, NotFoundError
from runtime.store import StoreURL
from tests.store.contracts.conftest import BACKENDS, fresh_store_url, open_again, open_test_backend

pytestmark = pytest.mark.anyio

GRANTS = ("session.read", "run.read", "run.create", "admin")


@pytest.fixture(params=BACKENDS)
def access_url(request: pytest.FixtureRequest, tmp_path: object) -> StoreURL:
    return fresh_store_url(request.param, tmp_path, request)  # type: ignore[arg-type]


@pytest.fixture
async def store(access_url: StoreURL) -> AsyncIterator[StoreBackend]:
    async with open_test_backend(access_url) as opened:
        yield opened


class Clock:
    def __init__(self) -> None:
        self.t = 1_000_000.0

    def __call__(self) -> float:
        return self.t


async def test_a_token_is_stored_as_a_hash_and_verifies_only_with_its_secret(store: StoreBackend) -> None:
    tokens = TokenService(store.tokens(), GRANTS)
    record, text = await tokens.create("acme", "web", ["run.read", "run.create"], name="ci")
    secret = text.split(".")[2]
    stored = await store.tokens().get(record.id)
    assert stored is not None and stored.grants == ("run.read", "run.create") and stored.name == "ci"
    assert secret.encode() not in stored.digest + stored.salt and len(secret) >= 43  # 256 bits, base64url
    good = await tokens.verify(text)
    assert good.ok and good.token is not None and good.token.tenant == "acme" and good.token.project == "web"
    wrong = await tokens.verify(text[:-2] + ("AA" if not text.endswith("AA") else "BB"))
    assert not wrong.ok and wrong.reason == "wrong_secret" and wrong.token_id == record.id
    assert (await tokens.verify("rath.tok_0190f3c2a1b4e5f60718293a.x")).reason == "unknown"
    assert (await tokens.verify("not a token")).reason == "malformed"


async def test_a_revocation_through_another_backend_refuses_the_token_at_once(store: StoreBackend) -> None:
    tokens = TokenService(store.tokens(), GRANTS)
    record, text = await tokens.create("acme", "web", ["admin"])
    assert (await tokens.verify(text)).ok
    other = await open_again(store)
    try:
        revoked = await TokenService(other.tokens(), GRANTS).revoke(record.id)
        assert revoked.revoked_at is not None
    finally:
        await other.close()
    assert (await tokens.verify(text)).reason == "revoked"
    again = await tokens.revoke(record.id)  # revoking twice keeps the first time
    assert again.revoked_at == revoked.revoked_at
    with pytest.raises(NotFoundError):
        await tokens.revoke("tok_0190f3c2a1b4e5f60718293a")


async def test_a_token_expires_when_its_ttl_has_passed(store: StoreBackend) -> None:
    clock = Clock()
    tokens = TokenService(store.tokens(), GRANTS, clock=clock)
    _, text = await tokens.create("acme", "web", ["run.read"], ttl_s=60)
    clock.t += 59
    assert (await tokens.verify(text)).ok
    clock.t += 1
    assert (await tokens.verify(text)).reason == "expired"


async def test_bad_token_requests_are_refused_and_write_nothing(store: StoreBackend) -> None:
    tokens = TokenService(store.tokens(), GRANTS)
    for tenant, project, grants in [("", "p", ["admin"]), ("t", "a b", ["admin"]), ("t", "p", []), ("t", "p", ["x"])]:
        with pytest.raises(InvalidInputError):
            await tokens.create(tenant, project, grants)
    assert await tokens.list() == []


async def test_tokens_list_oldest_first_without_secrets(store: StoreBackend) -> None:
    tokens = TokenService(store.tokens(), GRANTS)
    first, _ = await tokens.create("a", "p", ["admin"], name="one")
    second, _ = await tokens.create("b", "q", ["run.read"])
    listed = [t.public() for t in await tokens.list()]
    assert [t["token_id"] for t in listed] == [first.id, second.id]
    assert all("digest" not in t and "salt" not in t for t in listed)


async def test_audit_records_come_back_in_order_and_the_last_n(store: StoreBackend) -> None:
    audit = store.audit()
    records = [
        AuditRecord(at=float(i), actor=f"tok_{i}", tenant="t", project="p", action="session_create", outcome="ok")
        for i in range(5)
    ]
    await audit.append(records[:3])
    await audit.append(
        [
            *records[3:],
            AuditRecord(
                1.5, "anonymous", None, None, "http GET /mcp", "refused", reason="missing_token", method="none"
            ),
        ]
    )
    last = await audit.recent(3)
    assert [r.actor for r in last] == ["tok_3", "tok_4", "anonymous"]
    assert last[-1].tenant is None and last[-1].reason == "missing_token" and last[-1].method == "none"
    seqs = [r.seq for r in await audit.recent(100)]
    assert len(seqs) == 6 and seqs == sorted(seqs)


async def test_ops_counts_runs_by_status_across_scopes_and_answers_a_ping(store: StoreBackend) -> None:
    ops = store.ops()
    await ops.ping()
    assert await ops.run_counts() == {}
    ids = []
    for tenant in ("a", "b"):
        runs = store.runs(tenant, "p")
        new = NewRun(workflow="echo", plan_hash="h", step="first", input_json="{}")
        ids.append(await runs.create(new, [("run.created", {"workflow": "echo"})]))
    assert await ops.run_counts() == {"queued": 2}
    assert await ops.step_durations(0.0, 10) == []
    runs = store.runs("a", "p")
    (claim,) = await runs.claim("w1", 30.0, 1, ["echo"])
    await runs.commit(StepCommit(claim.id, claim.token, {"state": "{}"}, [("step.completed", {"step": "first"})]))
    assert await ops.run_counts() == {"queued": 1, "running": 1}
    (done,) = await ops.step_durations(0.0, 10)
    assert done[1] == "echo" and done[2] >= 0.0
    assert await ops.step_durations(done[0], 10) == []  # a cursor past it finds nothing new
