"""The PostgreSQL backend depends on no layer above the store but the few shared modules it may use,
and on each layer's store protocol and records where it implements them."""

from __future__ import annotations

from pathlib import Path

from tests.test_layers import imported_modules

PACKAGE = Path(__file__).resolve().parents[3] / "runtime" / "store" / "postgres"
ALLOWED = (
    "runtime.errors",
    "runtime.ids",
    "runtime.memory.text",
    "runtime.store.postgres",
    "runtime.store.migration",  # the shape of a migration, shared by both backends
    "runtime.store.core",  # each store operation written once, for both backends (issue 26)
    # A layer's store implements that layer's protocol, in its records (as the SQLite stores do):
    *("runtime.sessions.store", "runtime.sessions.model", "runtime.sessions.lineage"),
    *("runtime.memory.store", "runtime.memory.model"),
    "runtime.access.store",  # the token, audit and ops store protocols (serve --auth)
    *("runtime.durable.store", "runtime.durable.models"),
    "runtime.schedules.store",  # the ticks a schedule store fires (its runs announced like any run's)
)
# The backend assembles the stores for the runtime and is found by its URL.
BACKEND = ("runtime.backend", "runtime.store.url")


def test_the_postgres_backend_imports_only_the_shared_runtime_modules() -> None:
    files = sorted(PACKAGE.glob("*.py"))
    assert len(files) >= 6
    found = [
        f"{path.name}:{line} imports {name}"
        for path in files
        for line, name in imported_modules(path.read_text(encoding="utf-8"), path.name)
        if name.startswith("runtime") and not name.startswith(ALLOWED + (BACKEND if path.name == "backend.py" else ()))
    ]
    assert found == []
