"""The embedded SQLite backend: one database file under the home, WAL mode, group-committed writes.

``database`` is the file itself (connection threads, group commit, in-loop point reads), ``migrations``
the whole schema in order, and ``sessions``/``durable``/``runs``/``memory`` the layers' store
protocols implemented on it. ``backend`` assembles them for ``runtime.store.open_backend``.
"""
