"""Tables of the memory layer.

Items live in ``memory_items`` (one row per URI and tenant/project). Each tenant/project pair is a
*memory space* with its own FTS5 table ``memory_fts_<space id>``, created on the space's first
write: BM25 statistics (document count, average length, document frequencies) are then those of
the space alone, so neither the results nor the scores of one tenant or project depend on another's
items. An FTS row's rowid is its item's ``seq``; its one column holds the normalised body
(see ``runtime.memory.text``), not the original content. ``digest`` (a hash of the content)
lets ``commit`` skip a fact already extracted into the same scope by an earlier commit.
``memory_vectors`` holds an item's embedding (``runtime.store.core.vectors``), one row per item.
"""

from runtime.store.migration import Migration

MIGRATIONS: list[Migration] = [
    Migration(
        "0200_memory_items",
        """
        CREATE TABLE memory_spaces (
            id INTEGER PRIMARY KEY,
            tenant TEXT NOT NULL,
            project TEXT NOT NULL,
            UNIQUE (tenant, project)
        );
        CREATE TABLE memory_items (
            seq INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            space_id INTEGER NOT NULL REFERENCES memory_spaces(id),
            tenant TEXT NOT NULL,
            project TEXT NOT NULL,
            scope TEXT NOT NULL,
            uri TEXT NOT NULL,
            content TEXT NOT NULL,
            tags TEXT NOT NULL,
            source TEXT,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            UNIQUE (tenant, project, uri)
        );
        CREATE INDEX memory_items_source ON memory_items (tenant, project, source);
        """,
    ),
    Migration(
        "0201_memory_digest",
        """
        ALTER TABLE memory_items ADD COLUMN digest TEXT;
        CREATE INDEX memory_items_digest ON memory_items (tenant, project, scope, digest);
        """,
    ),
    Migration(
        "0202_memory_id_scope",
        """
        CREATE INDEX memory_items_scope_id ON memory_items (tenant, project, id);
        """,
    ),
    Migration(
        "0203_memory_vectors",
        """
        CREATE TABLE memory_vectors (
            seq INTEGER PRIMARY KEY,
            space_id INTEGER NOT NULL,
            model TEXT NOT NULL,
            digest TEXT NOT NULL,
            scale REAL NOT NULL,
            vec BLOB NOT NULL,
            stamp INTEGER NOT NULL
        );
        CREATE INDEX memory_vectors_stamp ON memory_vectors (stamp);
        CREATE INDEX memory_vectors_space ON memory_vectors (space_id, model, stamp);
        """,
    ),
]
