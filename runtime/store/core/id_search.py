"""Searching a table's ids by prefix (what completion asks on every keystroke), written once for every store.

Ids made one after another sort in that order (``runtime/ids.py``), so "newest first" is ``ORDER BY id
DESC``; the search is a range scan on an index of (tenant, project, …, id), never a scan and sort of a
whole tenant/project (``tests/test_id_search.py`` checks the plans).
"""

from __future__ import annotations

from runtime.store.core.dialect import Dialect
from runtime.store.core.statements import Op, rows


def prefix_bounds(prefix: str) -> tuple[str, str]:
    """``lo, hi`` such that ``lo <= x < hi`` holds exactly for the strings ``x`` starting with ``prefix``,
    under byte order (SQLite's binary collation; PostgreSQL's id and URI columns are ``COLLATE "C"``)."""
    return prefix, prefix + "\U0010ffff"


def id_search_sql(table: str, also: str = "") -> str:
    """The ids in ``table`` that start with a prefix, newest first, within one tenant/project (``also``: a
    further condition, without placeholders). Its arguments: tenant, project, ``prefix_bounds``, limit."""
    return (
        f"SELECT id FROM {table} WHERE tenant = ? AND project = ?{also} AND id >= ? AND id < ? ORDER BY id DESC LIMIT ?"
    )


def ids_by_prefix(
    d: Dialect, table: str, tenant: str, project: str, prefix: str, limit: int, also: str = ""
) -> Op[list[str]]:
    """The ids of ``table`` starting with ``prefix``, newest first (``id_search_sql``)."""
    found = yield rows(id_search_sql(table, also), tenant, project, *prefix_bounds(prefix), limit)
    return [r[0] for r in found]
