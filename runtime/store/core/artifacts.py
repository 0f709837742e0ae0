"""The artifact rows (``runtime.artifacts.model.ArtifactRecords``) written once for both backends.

One table, ``artifacts``: an artifact's metadata, scoped by tenant/project like every other row.
Its bytes are not here but in the blob store, under a key of the scope and the content's sha256;
``delete`` says how many rows of the scope still name that content in the same transaction that
removes the row, so the caller removes the bytes only when nothing refers to them any more.
"""

from __future__ import annotations

from runtime.artifacts.model import COLUMNS, Artifact
from runtime.durable.store_shared import Scope
from runtime.errors import StoreError
from runtime.ids import now
from runtime.store.core.dialect import Dialect
from runtime.store.core.statements import Duplicate, Executor, Op, Scoped, none, one, rows, scoped, unscoped, value

_INSERT = f"INSERT INTO artifacts ({COLUMNS}) VALUES ({', '.join('?' * len(COLUMNS.split(',')))})"
_GET = f"SELECT {COLUMNS} FROM artifacts WHERE tenant = ? AND project = ? AND id = ?"
_DELETING = "SELECT 1 FROM artifact_deletions WHERE tenant = ? AND project = ? AND sha256 = ? LIMIT 1"
_REFS = "SELECT count(*) FROM artifacts WHERE tenant = ? AND project = ? AND sha256 = ?"


def _content_lock(d: Dialect, tenant: str, project: str, sha256: str) -> Op[None]:
    """Where writers run at once (PostgreSQL), a save's row and a delete's count of one content queue."""
    if d.xact_lock:
        yield none(d.xact_lock, f"artifact {tenant} {project} {sha256}", 0)


def add_artifact(d: Dialect, artifact: Artifact) -> Op[bool]:
    """Insert the row; whether a delete of the same content is under way (then the caller checks its bytes)."""
    yield from _content_lock(d, artifact.tenant, artifact.project, artifact.sha256)
    try:
        yield none(_INSERT, *artifact.row())
    except Duplicate as exc:
        raise StoreError(f"an artifact {artifact.id} exists already") from exc
    deleting = yield value(_DELETING, artifact.tenant, artifact.project, artifact.sha256)
    return deleting is not None


def get_artifact(d: Dialect, scope: Scope, artifact_id: str) -> Op[Artifact | None]:
    row = yield one(_GET, scope.tenant, scope.project, artifact_id)
    return None if row is None else Artifact.from_row(row)


def find_artifact(
    d: Dialect, scope: Scope, sha256: str, name: str, session_id: str | None, run_id: str | None
) -> Op[Artifact | None]:
    """The oldest artifact of the scope with this content, name, session and run (None: there is none)."""
    sql = f"SELECT {COLUMNS} FROM artifacts WHERE tenant = ? AND project = ? AND sha256 = ? AND name = ?"
    args: list[object] = [scope.tenant, scope.project, sha256, name]
    for column, wanted in (("session_id", session_id), ("run_id", run_id)):
        sql += f" AND {column} IS NULL" if wanted is None else f" AND {column} = ?"
        args += [] if wanted is None else [wanted]
    row = yield one(sql + " ORDER BY id LIMIT 1", *args)
    return None if row is None else Artifact.from_row(row)


def list_artifacts(
    d: Dialect, scope: Scope, *, session_id: str | None, run_id: str | None, after: str | None, limit: int
) -> Op[list[Artifact]]:
    sql = f"SELECT {COLUMNS} FROM artifacts WHERE tenant = ? AND project = ?"
    args: list[object] = [scope.tenant, scope.project]
    for column, wanted in (("session_id", session_id), ("run_id", run_id), ("id >", after)):
        if wanted is not None:
            sql += f" AND {column}{'' if column.endswith('>') else ' ='} ?"
            args.append(wanted)
    found = yield rows(sql + " ORDER BY id LIMIT ?", *args, limit)
    return [Artifact.from_row(r) for r in found]


def delete_artifact(d: Dialect, scope: Scope, artifact_id: str, token: str) -> Op[tuple[Artifact | None, int]]:
    """Remove the row; with no row left naming its content, mark the content as being deleted (``token``)."""
    gone = yield from get_artifact(d, scope, artifact_id)
    if gone is None:
        return None, 0
    yield from _content_lock(d, scope.tenant, scope.project, gone.sha256)
    sql = "DELETE FROM artifacts WHERE tenant = ? AND project = ? AND id = ?"
    yield none(sql, scope.tenant, scope.project, artifact_id)
    return gone, (yield from _mark_if_unreferenced(scope, gone.sha256, token))


def mark_unreferenced(d: Dialect, scope: Scope, sha256: str, token: str) -> Op[int]:
    """How many rows of the scope name the content; at 0, the content is marked as being deleted
    (``token``), as a delete of its last row marks it: the GC pass removes bytes no row names under
    the same protocol, so a save of that content meanwhile keeps its bytes."""
    yield from _content_lock(d, scope.tenant, scope.project, sha256)
    return (yield from _mark_if_unreferenced(scope, sha256, token))


def _mark_if_unreferenced(scope: Scope, sha256: str, token: str) -> Op[int]:
    """Under the content's lock: how many rows name it; at 0, mark it as being deleted (``token``)."""
    left = int((yield value(_REFS, scope.tenant, scope.project, sha256)) or 0)
    if left == 0:
        yield none(
            "INSERT INTO artifact_deletions (tenant, project, sha256, token, at) VALUES (?, ?, ?, ?, ?)",
            scope.tenant,
            scope.project,
            sha256,
            token,
            now(),
        )
    return left


def end_deletion(d: Dialect, scope: Scope, sha256: str, token: str) -> Op[None]:
    yield none(
        "DELETE FROM artifact_deletions WHERE tenant = ? AND project = ? AND sha256 = ? AND token = ?",
        scope.tenant,
        scope.project,
        sha256,
        token,
    )


def end_deletions_before(d: Dialect, scope: Scope, cutoff: float) -> Op[int]:
    """Forget the marks of deletes that died before ending them (their bytes are the GC pass's)."""
    sql = "DELETE FROM artifact_deletions WHERE tenant = ? AND project = ? AND at < ?"
    return int((yield none(sql, scope.tenant, scope.project, cutoff)) or 0)


def content_refs(d: Dialect, scope: Scope, sha256: str) -> Op[int]:
    found = yield value(_REFS, scope.tenant, scope.project, sha256)
    return int(found or 0)


def total_size(d: Dialect, scope: Scope) -> Op[int]:
    sql = "SELECT sum(size) FROM artifacts WHERE tenant = ? AND project = ?"
    return int((yield value(sql, scope.tenant, scope.project)) or 0)


class CoreArtifactStore(Scoped[Scope]):
    """The artifact rows of one tenant/project, on a backend's executor."""

    add = unscoped(add_artifact, "small")
    get = scoped(get_artifact, "lookup")
    find = scoped(find_artifact)
    list = scoped(list_artifacts)
    delete = scoped(delete_artifact, "small")
    mark_unreferenced = scoped(mark_unreferenced, "small")
    end_deletion = scoped(end_deletion, "small")
    end_deletions_before = scoped(end_deletions_before, "write")
    refs = scoped(content_refs)
    total_size = scoped(total_size)

    def __init__(self, ex: Executor, tenant: str, project: str) -> None:
        super().__init__(ex, Scope(tenant, project))
