"""The memory store (``runtime.memory.store.MemoryStore``) written once: items, spaces, scopes and paging.

Each tenant/project is a memory *space* (a ``memory_spaces`` row); its items are ``memory_items``
rows, one per URI. What the two backends do differently is the keyword index alone, so that is the
one part each keeps (``runtime/store/sqlite/recall.py``: an FTS5 table per space;
``runtime/store/postgres/recall.py``: BM25 postings tables in plain SQL), behind ``Recall``: the
index is changed in the items' own transaction (a committed item is searchable at once, a rolled
back one never was) and the ranked query is the module's, computing the score
``runtime.memory.store`` defines with ``K1`` and ``B`` below. Which items a recall may return
(scores > 0 only, best first, ties to the older item, ``k`` at most, the space's own) is decided here.

A write at a URI is one upsert on both backends: on PostgreSQL the row lock orders two writers at one
URI (the second replaces the first's item), and SQLite's writers are serialized anyway. Every
item written is removed from the index before it is indexed again (removing one never indexed
removes nothing), which costs no more statements than asking whether it was there.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from runtime.errors import StoreError
from runtime.ids import new_id, now
from runtime.memory.model import MemoryItem
from runtime.memory.store import SUPERSEDED, Found, NewMemory, content_digest
from runtime.store.core import vectors as vector_ops
from runtime.store.core.dialect import Dialect
from runtime.store.core.memory_rows import COLUMNS as COLUMNS
from runtime.store.core.memory_rows import ITEM_COLUMNS as ITEM_COLUMNS
from runtime.store.core.memory_rows import find_space as find_space
from runtime.store.core.statements import Duplicate, Executor, Op, Row, many, none, one, rows, value

#: BM25's term-frequency saturation and length normalisation (FTS5's own ``bm25()`` defaults too).
K1 = 1.2
B = 0.75


_UPSERT = (
    "INSERT INTO memory_items (id, space_id, tenant, project, scope, uri, content, tags, source, created_at,"
    " updated_at, digest) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (tenant, project, uri) DO UPDATE SET content = excluded.content, tags = excluded.tags,"
    " source = excluded.source, updated_at = excluded.updated_at, digest = excluded.digest"
    " RETURNING seq, id, created_at"
)
_SAME = (
    f"SELECT {COLUMNS} FROM memory_items WHERE tenant = ? AND project = ? AND scope = ? AND digest = ?"
    " AND content = ? LIMIT 1"
)
_SCOPED = "tenant = ? AND project = ? AND "


class Recall(Protocol):
    """A backend's keyword index of a space's items: ops run inside the items' transaction."""

    def create(self, d: Dialect, space: int) -> Op[None]:
        """Make a new space's index (once, when the space is made)."""
        ...

    def put(self, d: Dialect, space: int, items: Mapping[int, NewMemory]) -> Op[None]:
        """Index items (by ``seq``) in place of whatever the index held for them."""
        ...

    def unindex(self, d: Dialect, space: int, seqs: Sequence[int]) -> Op[int]:
        """Take items out of the index (those not in it are ignored)."""
        ...

    def search(self, d: Dialect, space: int, terms: list[str], k: int, scope: str | None) -> Op[list[Row]]:
        """The ``k`` best items for the distinct ``terms``: rows of ``ITEM_COLUMNS`` and ``score``,
        best first (ties by seq), of ``scope`` alone when it is given."""
        ...

    def search_small(self, d: Dialect, space: int, terms: list[str], k: int, scope: str | None) -> Op[list[Row] | None]:
        """What ``search`` returns when its cost is bounded small before it is done, else None: asked on
        the event loop's own connection where the dialect reads there (``Dialect.point_reads``)."""
        ...


def put(
    d: Dialect,
    recall: Recall,
    tenant: str,
    project: str,
    space: int | None,
    items: list[NewMemory],
    supersede: list[str],
) -> Op[tuple[int, list[MemoryItem]]]:
    space = yield from find_space(d, tenant, project, space)
    if space is None:  # two first writers at once (PostgreSQL): the second's DO UPDATE returns the first's
        space = int(
            (
                yield value(
                    "INSERT INTO memory_spaces (tenant, project) VALUES (?, ?)"
                    " ON CONFLICT (tenant, project) DO UPDATE SET tenant = excluded.tenant RETURNING id",
                    tenant,
                    project,
                )
            )
        )
        yield from recall.create(d, space)
    for uri in supersede:
        yield from _supersede(d, recall, tenant, project, space, uri)
    fresh: dict[int, NewMemory] = {}  # seq -> what it holds now (a URI written twice: the last)
    stored: list[MemoryItem] = []
    for new in items:
        stored.append((yield from _put_one(d, tenant, project, space, new, fresh)))
    if fresh:
        yield from recall.put(d, space, fresh)
    return space, stored


def _put_one(
    d: Dialect, tenant: str, project: str, space: int, new: NewMemory, fresh: dict[int, NewMemory]
) -> Op[MemoryItem]:
    t, digest = now(), content_digest(new.content)
    if new.once_per_scope:
        if d.xact_lock:  # two writers of the same fact must not both miss each other's item
            yield none(d.xact_lock, f"{new.scope} {digest}", space)
        same = yield one(_SAME, tenant, project, new.scope, digest, new.content)
        if same is not None:
            return MemoryItem.from_row(same)
    tags = json.dumps(list(new.tags), ensure_ascii=False)
    memory_id = new.id or new_id("mem")
    try:
        row = yield one(
            _UPSERT, memory_id, space, tenant, project, new.scope, new.uri, new.content, tags, new.source, t, t, digest
        )
    except Duplicate as exc:
        raise StoreError(f"memory item {memory_id} exists already at another URI than {new.uri}") from exc
    fresh[int(row["seq"])] = new
    return MemoryItem(
        id=row["id"],
        uri=new.uri,
        scope=new.scope,
        content=new.content,
        tags=new.tags,
        source=new.source,
        created_at=row["created_at"],
        updated_at=t,
        tenant=tenant,
        project=project,
    )


def _supersede(d: Dialect, recall: Recall, tenant: str, project: str, space: int, uri: str) -> Op[None]:
    """The item at ``uri`` is tagged superseded and leaves the index (it stays readable and listed)."""
    row = yield one(
        f"SELECT seq, tags FROM memory_items WHERE tenant = ? AND project = ? AND uri = ?{d.for_update}",
        tenant,
        project,
        uri,
    )
    if row is None or SUPERSEDED in (tags := json.loads(row["tags"])):
        return
    yield none(
        "UPDATE memory_items SET tags = ? WHERE seq = ?",
        json.dumps([*tags, SUPERSEDED], ensure_ascii=False),
        row["seq"],
    )
    yield from recall.unindex(d, space, [int(row["seq"])])
    yield none("DELETE FROM memory_vectors WHERE seq = ?", row["seq"])


def delete(
    d: Dialect, recall: Recall, tenant: str, project: str, space: int | None, where: str, args: tuple[str, ...]
) -> Op[int]:
    space = yield from find_space(d, tenant, project, space)
    if space is None:
        return 0
    gone = yield rows(f"DELETE FROM memory_items WHERE {_SCOPED}{where} RETURNING seq", tenant, project, *args)
    if gone:
        seqs = [int(r[0]) for r in gone]
        yield from recall.unindex(d, space, seqs)
        yield many("DELETE FROM memory_vectors WHERE seq = ?", [(seq,) for seq in seqs])
    return len(gone)


#: A recall of more distinct terms than this is not tried on the event loop (each term is a probe of its own).
SMALL_TERMS = 8


def search(
    d: Dialect,
    recall: Recall,
    tenant: str,
    project: str,
    space: int | None,
    terms: list[str],
    k: int,
    scope: str | None,
    small: bool = False,
) -> Op[tuple[int | None, list[Found] | None]]:
    """The recall's hits; ``small``: None unless its cost is known small first (``Recall.search_small``)."""
    space = yield from find_space(d, tenant, project, space)
    distinct = list(dict.fromkeys(terms))
    if space is None or not distinct or k < 1:
        return space, []
    if small:
        found = yield from recall.search_small(d, space, distinct, k, scope)
        if found is None:
            return space, None
    else:
        found = yield from recall.search(d, space, distinct, k, scope)
    return space, [Found(MemoryItem.from_row(r), float(r["score"])) for r in found if r["score"] > 0]


def item(d: Dialect, tenant: str, project: str, column: str, key: str) -> Op[MemoryItem | None]:
    row = yield one(f"SELECT {COLUMNS} FROM memory_items WHERE {_SCOPED}{column} = ?", tenant, project, key)
    return None if row is None else MemoryItem.from_row(row)


def scan(d: Dialect, tenant: str, project: str, prefix: str, limit: int, after: str | None) -> Op[list[MemoryItem]]:
    where, args = _under(prefix)
    if after is not None:
        where, args = where + " AND uri > ?", (*args, after)
    found = yield rows(
        f"SELECT {COLUMNS} FROM memory_items WHERE {_SCOPED}{where} ORDER BY uri LIMIT ?", tenant, project, *args, limit
    )
    return [MemoryItem.from_row(r) for r in found]


def tree(
    d: Dialect, tenant: str, project: str, prefix: str, after: str | None, limit: int
) -> Op[list[tuple[str, MemoryItem | int, str]]]:
    """What lies directly under ``prefix``, in URI order after the entry ``after``: items (URI, item,
    its id) and child prefixes ending in ``/`` (prefix, how many items under it, the id of its first
    item). Each entry is one index probe (and a child one range count), so a page costs ``limit``
    probes however many items there are."""
    hi = _bounds(prefix)[1]
    if after is None:
        start, op = prefix, ">="
    elif after.endswith("/"):  # a child prefix: go past everything under it
        start, op = _bounds(after)[1], ">="
    else:
        start, op = after, ">"
    out: list[tuple[str, MemoryItem | int, str]] = []
    while len(out) < limit:
        sql = f"SELECT {COLUMNS} FROM memory_items WHERE {_SCOPED}uri {op} ? AND uri < ? ORDER BY uri LIMIT 1"
        row = yield one(sql, tenant, project, start, hi)
        if row is None:
            break
        head, sep, _ = row["uri"][len(prefix) :].partition("/")
        if not sep:
            out.append((row["uri"], MemoryItem.from_row(row), row["id"]))
            start, op = row["uri"], ">"
            continue
        child = prefix + head + "/"
        n = yield value(
            f"SELECT count(*) FROM memory_items WHERE {_SCOPED}uri >= ? AND uri < ?", tenant, project, *_bounds(child)
        )
        out.append((child, int(n), row["id"]))
        start, op = _bounds(child)[1], ">="
    return out


def ids(d: Dialect, tenant: str, project: str, prefix: str, limit: int) -> Op[list[str]]:
    """Ids starting with ``prefix``, newest first: a range scan on the index of (tenant, project, id)."""
    found = yield rows(
        f"SELECT id FROM memory_items WHERE {_SCOPED}id >= ? AND id < ? ORDER BY id DESC LIMIT ?",
        tenant,
        project,
        *_bounds(prefix),
        limit,
    )
    return [r[0] for r in found]


def _bounds(prefix: str) -> tuple[str, str]:
    """``lo <= x < hi`` exactly for the strings ``x`` starting with ``prefix`` under byte order (SQLite's
    binary collation; PostgreSQL's id and URI columns are ``COLLATE "C"``): a range scan on an index."""
    return prefix, prefix + "\U0010ffff"


def _under(prefix: str) -> tuple[str, tuple[str, ...]]:
    return "uri >= ? AND uri < ?", _bounds(prefix)


class CoreMemoryStore:
    """One tenant/project's memory on a backend's ``Executor``, searched by the backend's ``Recall``."""

    def __init__(self, ex: Executor, recall: Recall, tenant: str, project: str) -> None:
        self.ex = ex
        self.recall = recall
        self.tenant = tenant
        self.project = project
        self._space: int | None = None  # cached once committed: a space is never removed

    async def put(self, items: list[NewMemory], supersede: Sequence[str] = ()) -> list[MemoryItem]:
        """Write items in one transaction (all or none) and return them as stored.

        The items at the ``supersede`` URIs leave the search index in the same transaction (they
        stay readable and listed, tagged ``superseded``): a newer item holds what they held.
        """
        space, stored = await self.ex.write(
            put, self.recall, self.tenant, self.project, self._space, list(items), list(supersede)
        )
        self._space = space
        return stored

    async def delete(self, *, memory_id: str | None = None, uri: str | None = None, prefix: str | None = None) -> int:
        """Delete by id, exact URI or URI prefix (the caller passes exactly one); returns how many."""
        where: str
        args: tuple[str, ...]
        if memory_id is not None:
            where, args = "id = ?", (memory_id,)
        elif uri is not None:
            where, args = "uri = ?", (uri,)
        else:
            assert prefix is not None
            where, args = _under(prefix)
        return await self.ex.write(delete, self.recall, self.tenant, self.project, self._space, where, args)

    async def search(self, terms: list[str], k: int, scope: str | None) -> list[Found]:
        """The ``k`` best items for any of ``terms`` by BM25, best first, scores > 0 only."""
        if not terms:
            return []
        if self._space is None:
            # The space's own read first: the search is then one statement. On PostgreSQL an operation
            # once found to run two statements is read in a transaction from then on (BEGIN and COMMIT:
            # two more round trips), and a hybrid recall's keyword search could be the first read.
            self._space = await self.ex.read(find_space, self.tenant, self.project, None)
            if self._space is None:
                return []
        args = (self.recall, self.tenant, self.project, self._space, terms, k, scope)
        if self.ex.dialect.point_reads and len(set(terms)) <= SMALL_TERMS:  # no hop to a reader when known small
            space, found = await self.ex.lookup(search, *args, True)
            self._space = space
            if found is not None:
                return found
        space, found = await self.ex.read(search, *args)
        self._space = space  # a reader sees only committed rows, so a space it found may be cached
        assert found is not None  # an unbounded search always searches
        return found

    async def get(self, memory_id: str) -> MemoryItem | None:
        return await self.ex.read(item, self.tenant, self.project, "id", memory_id)

    async def at(self, uri: str) -> MemoryItem | None:
        return await self.ex.read(item, self.tenant, self.project, "uri", uri)

    async def scan(self, prefix: str, limit: int, after: str | None = None) -> list[MemoryItem]:
        """Items whose URI starts with ``prefix`` (and sorts after ``after``), in URI order."""
        return await self.ex.read(scan, self.tenant, self.project, prefix, limit, after)

    async def ids(self, prefix: str, limit: int) -> list[str]:
        """Ids of items starting with ``prefix``, newest first."""
        return await self.ex.read(ids, self.tenant, self.project, prefix, limit)

    async def tree(self, prefix: str, after: str | None, limit: int) -> list[tuple[str, MemoryItem | int, str]]:
        """Items and child prefixes (with counts) directly under ``prefix``, in URI order after ``after``."""
        return await self.ex.read(tree, self.tenant, self.project, prefix, after, limit)

    async def vectors_since(self, model: str, horizon: int) -> tuple[int, list[tuple[Any, ...]]]:
        """The next horizon and ``(seq, scope, scale, vec)`` of this space's vectors of ``model``
        stamped since ``horizon`` (``runtime.store.core.vectors``)."""
        space, nxt, found = await self.ex.read(vector_ops.since, self.tenant, self.project, model, horizon)
        self._space = space
        return nxt, found

    async def embedded(self, model: str, seqs: Sequence[int]) -> dict[int, MemoryItem]:
        """The items at ``seqs`` whose vector of ``model`` is of their current content."""
        return await self.ex.read(vector_ops.items, self.tenant, self.project, model, list(seqs))

    async def current(
        self, model: str, seqs: Sequence[int], whole: Sequence[int] = ()
    ) -> tuple[dict[int, str], dict[int, MemoryItem]]:
        """The ids of the items at ``seqs`` whose vector of ``model`` is of their current content, and
        the items of those at ``whole`` (no other content read)."""
        return await self.ex.read(vector_ops.current, self.tenant, self.project, model, list(seqs), list(whole))

    def vectors(self) -> vector_ops.CoreVectorStore:
        """Every space's vectors on this store (what the embedding task works through)."""
        return vector_ops.CoreVectorStore(self.ex)
