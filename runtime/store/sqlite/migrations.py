"""Every migration of the SQLite backend, in the order they apply: the tables described once
(``runtime/store/core/tables``), rendered in SQLite's DDL. Names are never reused or reordered once
released: add new steps at the end of a layer's list there."""

from runtime.store.core.dialect import SQLITE
from runtime.store.core.schema import render
from runtime.store.core.tables import SQLITE as STEPS
from runtime.store.migration import Migration

ALL_MIGRATIONS: list[Migration] = render(SQLITE, STEPS)
