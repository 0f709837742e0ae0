"""The artifact rows' contract (``runtime/store/core/artifacts.py``), run on SQLite and PostgreSQL.

Rows are scoped (another tenant's artifact is not there), paged by id with filters by session and
run, and a delete says how many rows of the scope still name the same content (its bytes go at 0).
"""

from __future__ import annotations

import pytest

from runtime.artifacts.model import Artifact
from runtime.backend import StoreBackend
from runtime.errors import StoreError
from runtime.ids import new_id

pytestmark = pytest.mark.anyio


def artifact(
    sha: str = "a" * 64, *, tenant: str = "acme", session_id: str | None = None, run_id: str | None = None
) -> Artifact:
    return Artifact(
        id=new_id("art"),
        tenant=tenant,
        project="web",
        name="report.txt",
        size=5,
        sha256=sha,
        mime_type="text/plain",
        session_id=session_id,
        run_id=run_id,
        created_at=1_000.5,
    )


async def test_an_artifact_reads_back_in_its_own_scope_only(backend: StoreBackend) -> None:
    mine = backend.artifacts("acme", "web")
    saved = artifact(session_id="ses_0190f3c2a1b4e5f60718293a", run_id="run_0190f3c2a1b4e5f60718293a")
    await mine.add(saved)
    assert await mine.get(saved.id) == saved
    assert await backend.artifacts("other", "web").get(saved.id) is None
    assert await backend.artifacts("acme", "app").get(saved.id) is None
    assert await backend.artifacts("other", "web").delete(saved.id, "t0") == (None, 0)
    assert await mine.get(saved.id) == saved
    with pytest.raises(StoreError, match="exists already"):
        await mine.add(saved)


async def test_lists_page_by_id_and_filter_by_session_and_run(backend: StoreBackend) -> None:
    store = backend.artifacts("acme", "web")
    session, run = "ses_0190f3c2a1b4e5f60718293a", "run_0190f3c2a1b4e5f60718293a"
    made = [artifact(session_id=session if i % 2 else None, run_id=run if i % 3 == 0 else None) for i in range(7)]
    for a in made:
        await store.add(a)
    await backend.artifacts("other", "web").add(artifact(tenant="other"))
    first = await store.list(session_id=None, run_id=None, after=None, limit=4)
    rest = await store.list(session_id=None, run_id=None, after=first[-1].id, limit=4)
    assert [a.id for a in [*first, *rest]] == [a.id for a in made]
    by_session = await store.list(session_id=session, run_id=None, after=None, limit=10)
    assert [a.id for a in by_session] == [a.id for i, a in enumerate(made) if i % 2]
    both = await store.list(session_id=session, run_id=run, after=None, limit=10)
    assert [a.id for a in both] == [made[3].id]
    assert await store.total_size() == 7 * 5


async def test_a_delete_counts_the_rows_left_naming_the_same_content(backend: StoreBackend) -> None:
    store = backend.artifacts("acme", "web")
    first, second, other = artifact("b" * 64), artifact("b" * 64), artifact("c" * 64)
    elsewhere = artifact("b" * 64, tenant="other")
    for a in (first, second, other):
        await store.add(a)
    await backend.artifacts("other", "web").add(elsewhere)
    assert await store.delete(first.id, "t1") == (first, 1)
    assert await store.delete(first.id, "t2") == (None, 0)
    assert await store.add(artifact("b" * 64)) is False  # no delete of that content under way
    assert await store.delete(second.id, "t3") == (second, 1)
    assert await store.get(other.id) == other


async def test_a_save_during_the_delete_of_its_content_is_told_so(backend: StoreBackend) -> None:
    store = backend.artifacts("acme", "web")
    only = artifact("d" * 64)
    assert await store.add(only) is False
    assert await store.delete(only.id, "tok") == (only, 0)  # the last row: the content is being deleted
    assert await backend.artifacts("other", "web").add(artifact("d" * 64, tenant="other")) is False
    assert await store.add(artifact("d" * 64)) is True  # so this save checks its bytes after its row
    assert await store.refs("d" * 64) == 1
    await store.end_deletion("d" * 64, "tok")
    assert await store.add(artifact("d" * 64)) is False
    stale = artifact("e" * 64)
    await store.add(stale)
    await store.delete(stale.id, "died")  # a delete whose process died before it ended
    assert await store.end_deletions_before(0.0) == 0 and await store.add(artifact("e" * 64)) is True
    assert await store.end_deletions_before(2e12) == 1 and await store.add(artifact("e" * 64)) is False


async def test_content_no_row_names_is_marked_as_a_delete_marks_it(backend: StoreBackend) -> None:
    """The GC pass's first step: content some row names is counted and left unmarked; content none
    names is marked, so a save of it meanwhile is told to check its bytes."""
    store = backend.artifacts("acme", "web")
    await store.add(artifact("f" * 64))
    assert await store.mark_unreferenced("f" * 64, "gc1") == 1
    assert await store.add(artifact("f" * 64)) is False  # not marked
    assert await backend.artifacts("other", "web").mark_unreferenced("f" * 64, "gc1") == 0  # another scope's rows
    assert await store.mark_unreferenced("9" * 64, "gc2") == 0
    assert await store.add(artifact("9" * 64)) is True
    await store.end_deletion("9" * 64, "gc2")
    assert await store.add(artifact("9" * 64)) is False


async def test_find_names_the_oldest_artifact_of_one_content_name_session_and_run(backend: StoreBackend) -> None:
    store = backend.artifacts("acme", "web")
    session, run = "ses_0190f3c2a1b4e5f60718293a", "run_0190f3c2a1b4e5f60718293a"
    first, second = artifact("1" * 64, session_id=session), artifact("1" * 64, session_id=session)
    await store.add(first)
    await store.add(second)
    await store.add(artifact("1" * 64, session_id=session, run_id=run))
    assert await store.find("1" * 64, "report.txt", session, None) == first
    assert (await store.find("1" * 64, "report.txt", session, run)) not in (None, first, second)
    assert await store.find("1" * 64, "other.txt", session, None) is None
    assert await store.find("1" * 64, "report.txt", None, None) is None
    assert await store.find("2" * 64, "report.txt", session, None) is None
    assert await backend.artifacts("other", "web").find("1" * 64, "report.txt", session, None) is None
