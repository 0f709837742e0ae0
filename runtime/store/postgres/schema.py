"""Every migration of the PostgreSQL backend, in the order they apply: the tables described once
(``runtime/store/core/tables``), rendered in PostgreSQL's DDL (``runtime.store.core.schema`` says how
the types differ). Names are never reused or reordered once released.

What is PostgreSQL's own: memory has no FTS5, so its keyword index is the BM25 tables of
``runtime.store.postgres.recall`` (``memory_postings``, ``memory_docs``, sharded ``memory_stats``),
made with the memory tables in 0200_memory.
"""

from __future__ import annotations

from runtime.store.core.dialect import POSTGRES
from runtime.store.core.schema import Step, render
from runtime.store.core.tables import POSTGRES as STEPS
from runtime.store.core.tables import memory, sessions
from runtime.store.migration import Migration
from runtime.store.postgres.recall import INDEX_DDL


def _rendered(steps: list[Step]) -> list[Migration]:
    return render(POSTGRES, steps, {"0200_memory": INDEX_DDL})


ALL = _rendered(STEPS)
SESSIONS = _rendered(sessions.POSTGRES)  # one layer's alone: what its contract tests migrate
MEMORY = _rendered(memory.POSTGRES)
