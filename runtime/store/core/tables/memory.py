"""Tables of the memory layer.

Items live in ``memory_items`` (one row per URI and tenant/project). Each tenant/project pair is a
*memory space* (``memory_spaces``), and its keyword index is the space's own, so neither the results
nor the BM25 scores of one tenant or project depend on another's items: on SQLite an FTS5 table
``memory_fts_<space id>``, created on the space's first write (``runtime.store.sqlite.recall``; an FTS
row's rowid is its item's ``seq``, its one column the normalised body, see ``runtime.memory.text``); on
PostgreSQL the BM25 tables of ``runtime.store.postgres.recall``, made with 0200_memory. ``digest`` (a
hash of the content) lets ``commit`` skip a fact already extracted into the same scope by an earlier
commit. ``memory_vectors`` holds an item's embedding (``runtime.store.core.vectors``), one row per item:
int8 bytes and a scale, stamped (SQLite: a counter; PostgreSQL: the writer's transaction id), which
readers page by.
"""

from runtime.store.core.schema import (
    BIG,
    BYTES,
    FLOAT,
    ID,
    JSON,
    SERIAL,
    TEXT,
    AddColumn,
    Change,
    Col,
    Index,
    Step,
    Table,
)

SPACES = Table(
    "memory_spaces",
    [Col("id", SERIAL), Col("tenant", TEXT), Col("project", TEXT)],
    unique=[["tenant", "project"]],
)
ITEMS = Table(
    "memory_items",
    [
        Col("seq", SERIAL),
        Col("id", ID, unique=True),
        Col("space_id", BIG, ref="memory_spaces(id)"),
        Col("tenant", TEXT),
        Col("project", TEXT),
        Col("scope", TEXT),
        Col("uri", ID),
        Col("content", TEXT),
        Col("tags", JSON),
        Col("source", TEXT, null=True),
        Col("created_at", FLOAT),
        Col("updated_at", FLOAT),
    ],
    unique=[["tenant", "project", "uri"]],
)
SOURCE = Index("memory_items_source", "memory_items", "tenant, project, source")
DIGEST: list[Change] = [
    AddColumn("memory_items", Col("digest", TEXT, null=True)),
    Index("memory_items_digest", "memory_items", "tenant, project, scope, digest"),
]
SCOPE_ID = Index("memory_items_scope_id", "memory_items", "tenant, project, id")
VECTORS = Table(
    "memory_vectors",
    [
        Col("seq", BIG),
        Col("space_id", BIG),
        Col("model", TEXT),
        Col("digest", TEXT),
        Col("scale", FLOAT),
        Col("vec", BYTES),
        Col("stamp", BIG),
    ],
    key=["seq"],
)
VECTORS_SPACE = Index("memory_vectors_space", "memory_vectors", "space_id, model, stamp")
#: SQLite's horizon is ``max(stamp)``; PostgreSQL's comes from its snapshot, and needs no index for it.
VECTORS_STAMP = Index("memory_vectors_stamp", "memory_vectors", "stamp")

SQLITE = [
    Step("0200_memory_items", SPACES, ITEMS, SOURCE),
    Step("0201_memory_digest", *DIGEST),
    Step("0202_memory_id_scope", SCOPE_ID),
    Step("0203_memory_vectors", VECTORS, VECTORS_STAMP, VECTORS_SPACE),
]
POSTGRES = [
    Step("0200_memory", SPACES, ITEMS, SOURCE, *DIGEST, SCOPE_ID),  # + the keyword index (postgres/schema.py)
    Step("0201_memory_vectors", VECTORS, VECTORS_SPACE),
]
