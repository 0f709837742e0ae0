"""The embedded SQLite backend: one database file under the home, WAL mode, group-committed writes.

``database`` is the file itself (connection threads, group commit, in-loop point reads; ``opening``,
``guard``, ``health``, ``commit`` and ``threads`` its parts), ``executor`` drives the store core's
operations (``runtime/store/core``) on it, ``recall`` the FTS5 keyword index, ``migrations`` the core's
tables rendered as SQLite DDL. ``backend`` assembles them for ``runtime.store.open_backend``.
"""
