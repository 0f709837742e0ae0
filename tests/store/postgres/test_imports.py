"""The PostgreSQL backend depends on no layer above the store but the few shared modules it may use."""

from __future__ import annotations

from pathlib import Path

from tests.test_layers import imported_modules

PACKAGE = Path(__file__).resolve().parents[3] / "runtime" / "store" / "postgres"
ALLOWED = ("runtime.errors", "runtime.ids", "runtime.memory.text", "runtime.store.postgres")
# The per-layer stores implement their layer's protocol, so they may import it (and its records).
STORES = {"runs.py": ("runtime.durable.", "runtime.flow.workflow"), "durable.py": ("runtime.durable.",),
          "reap.py": ("runtime.durable.",), "decisions.py": ("runtime.durable.", "runtime.flow.workflow"),
          "backend.py": ("runtime.backend", "runtime.store.url")}  # fmt: skip


def test_the_postgres_backend_imports_only_the_shared_runtime_modules() -> None:
    files = sorted(PACKAGE.glob("*.py"))
    assert len(files) >= 6
    found = [
        f"{path.name}:{line} imports {name}"
        for path in files
        for line, name in imported_modules(path.read_text(encoding="utf-8"), path.name)
        if name.startswith("runtime") and not name.startswith(ALLOWED + STORES.get(path.name, ()))
    ]
    assert found == []
