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

from runtime.store.core.schema import AddColumn, Change, Index, Step, table

SPACES = table(
    "memory_spaces",
    """
    id        serial
    tenant    text
    project   text
    """,
    unique=[("tenant", "project")],
)
ITEMS = table(
    "memory_items",
    """
    seq          serial
    id           id     unique
    space_id     big    references memory_spaces(id)
    tenant       text
    project      text
    scope        text
    uri          id
    content      text
    tags         json
    source       text   null
    created_at   float
    updated_at   float
    """,
    unique=[("tenant", "project", "uri")],
)
SOURCE = Index("memory_items_source", "memory_items", "tenant, project, source")
DIGEST: list[Change] = [
    AddColumn("memory_items", "digest text null"),
    Index("memory_items_digest", "memory_items", "tenant, project, scope, digest"),
]
SCOPE_ID = Index("memory_items_scope_id", "memory_items", "tenant, project, id")
VECTORS = table(
    "memory_vectors",
    """
    seq        big    key
    space_id   big
    model      text
    digest     text
    scale      float
    vec        bytes
    stamp      big
    """,
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
