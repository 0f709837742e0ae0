"""The artifact rows (``runtime.artifacts.model.ArtifactRecords``) written once for both backends.

One table, ``artifacts``: an artifact's metadata, scoped by tenant/project like every other row.
Its bytes are not here but in the blob store, under a key of the scope and the content's sha256;
``delete`` says how many rows of the scope still name that content in the same transaction that
removes the row, so the caller removes the bytes only when nothing refers to them any more.
"""

from __future__ import annotations

from collections.abc import Sequence

from runtime.artifacts.model import COLUMNS, Artifact
from runtime.errors import StoreError
from runtime.ids import now
from runtime.store.core.dialect import Dialect
from runtime.store.core.statements import Duplicate, Executor, Op, none, one, rows, value

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


def get_artifact(d: Dialect, tenant: str, project: str, artifact_id: str) -> Op[Artifact | None]:
    row = yield one(_GET, tenant, project, artifact_id)
    return None if row is None else Artifact.from_row(row)


def find_artifact(
    d: Dialect, tenant: str, project: str, sha256: str, name: str, session_id: str | None, run_id: str | None
) -> Op[Artifact | None]:
    """The oldest artifact of the scope with this content, name, session and run (None: there is none)."""
    sql = f"SELECT {COLUMNS} FROM artifacts WHERE tenant = ? AND project = ? AND sha256 = ? AND name = ?"
    args: list[object] = [tenant, project, sha256, name]
    for column, wanted in (("session_id", session_id), ("run_id", run_id)):
        sql += f" AND {column} IS NULL" if wanted is None else f" AND {column} = ?"
        args += [] if wanted is None else [wanted]
    row = yield one(sql + " ORDER BY id LIMIT 1", *args)
    return None if row is None else Artifact.from_row(row)


def list_artifacts(
    d: Dialect,
    tenant: str,
    project: str,
    session_id: str | None,
    run_id: str | None,
    after: str | None,
    limit: int,
) -> Op[list[Artifact]]:
    sql = f"SELECT {COLUMNS} FROM artifacts WHERE tenant = ? AND project = ?"
    args: list[object] = [tenant, project]
    for column, wanted in (("session_id", session_id), ("run_id", run_id), ("id >", after)):
        if wanted is not None:
            sql += f" AND {column}{'' if column.endswith('>') else ' ='} ?"
            args.append(wanted)
    found = yield rows(sql + " ORDER BY id LIMIT ?", *args, limit)
    return [Artifact.from_row(r) for r in found]


def delete_artifact(
    d: Dialect, tenant: str, project: str, artifact_id: str, token: str, at: float
) -> Op[tuple[Artifact | None, int]]:
    """Remove the row; with no row left naming its content, mark the content as being deleted (``token``)."""
    gone = yield from get_artifact(d, tenant, project, artifact_id)
    if gone is None:
        return None, 0
    yield from _content_lock(d, tenant, project, gone.sha256)
    yield none("DELETE FROM artifacts WHERE tenant = ? AND project = ? AND id = ?", tenant, project, artifact_id)
    return gone, (yield from _mark_if_unreferenced(tenant, project, gone.sha256, token, at))


def mark_unreferenced(d: Dialect, tenant: str, project: str, sha256: str, token: str, at: float) -> Op[int]:
    """How many rows of the scope name the content; at 0, the content is marked as being deleted
    (``token``), as a delete of its last row marks it: the GC pass removes bytes no row names under
    the same protocol, so a save of that content meanwhile keeps its bytes."""
    yield from _content_lock(d, tenant, project, sha256)
    return (yield from _mark_if_unreferenced(tenant, project, sha256, token, at))


def _mark_if_unreferenced(tenant: str, project: str, sha256: str, token: str, at: float) -> Op[int]:
    """Under the content's lock: how many rows name it; at 0, mark it as being deleted (``token``)."""
    left = int((yield value(_REFS, tenant, project, sha256)) or 0)
    if left == 0:
        yield none(
            "INSERT INTO artifact_deletions (tenant, project, sha256, token, at) VALUES (?, ?, ?, ?, ?)",
            tenant,
            project,
            sha256,
            token,
            at,
        )
    return left


def end_deletion(d: Dialect, tenant: str, project: str, sha256: str, token: str) -> Op[None]:
    yield none(
        "DELETE FROM artifact_deletions WHERE tenant = ? AND project = ? AND sha256 = ? AND token = ?",
        tenant,
        project,
        sha256,
        token,
    )


def end_deletions_before(d: Dialect, tenant: str, project: str, cutoff: float) -> Op[int]:
    """Forget the marks of deletes that died before ending them (their bytes are the GC pass's)."""
    ended = yield none(
        "DELETE FROM artifact_deletions WHERE tenant = ? AND project = ? AND at < ?", tenant, project, cutoff
    )
    return int(ended or 0)


def content_refs(d: Dialect, tenant: str, project: str, sha256: str) -> Op[int]:
    found = yield value(_REFS, tenant, project, sha256)
    return int(found or 0)


def total_size(d: Dialect, tenant: str, project: str) -> Op[int]:
    total = yield value("SELECT sum(size) FROM artifacts WHERE tenant = ? AND project = ?", tenant, project)
    return int(total or 0)


class CoreArtifactStore:
    """The artifact rows of one tenant/project, on a backend's executor."""

    def __init__(self, ex: Executor, tenant: str, project: str) -> None:
        self.ex = ex
        self.tenant = tenant
        self.project = project

    async def add(self, artifact: Artifact) -> bool:
        return await self.ex.write(add_artifact, artifact, small=True)

    async def get(self, artifact_id: str) -> Artifact | None:
        return await self.ex.lookup(get_artifact, self.tenant, self.project, artifact_id)

    async def find(self, sha256: str, name: str, session_id: str | None, run_id: str | None) -> Artifact | None:
        return await self.ex.read(find_artifact, self.tenant, self.project, sha256, name, session_id, run_id)

    async def list(
        self, *, session_id: str | None, run_id: str | None, after: str | None, limit: int
    ) -> Sequence[Artifact]:
        return await self.ex.read(list_artifacts, self.tenant, self.project, session_id, run_id, after, limit)

    async def delete(self, artifact_id: str, token: str) -> tuple[Artifact | None, int]:
        return await self.ex.write(delete_artifact, self.tenant, self.project, artifact_id, token, now(), small=True)

    async def mark_unreferenced(self, sha256: str, token: str) -> int:
        return await self.ex.write(mark_unreferenced, self.tenant, self.project, sha256, token, now(), small=True)

    async def end_deletion(self, sha256: str, token: str) -> None:
        await self.ex.write(end_deletion, self.tenant, self.project, sha256, token, small=True)

    async def end_deletions_before(self, cutoff: float) -> int:
        return await self.ex.write(end_deletions_before, self.tenant, self.project, cutoff)

    async def refs(self, sha256: str) -> int:
        return await self.ex.read(content_refs, self.tenant, self.project, sha256)

    async def total_size(self) -> int:
        return await self.ex.read(total_size, self.tenant, self.project)
