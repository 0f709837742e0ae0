"""The layering rule: ``runtime/`` knows nothing of MCP; imports point down only.

Every file under ``runtime/`` is parsed with ``ast`` (not grepped), so imports inside functions,
``if TYPE_CHECKING`` blocks and ``importlib.import_module("…")`` calls with a literal name all count.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUNTIME = ROOT / "runtime"
FORBIDDEN = ("mcp", "mcp_types", "rath_mcp")  # the MCP SDK (2.x ships its types as mcp_types) and our adapter


def imported_modules(source: str, filename: str = "<source>") -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in ``source``; relative imports are skipped
    (they stay inside their own package)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Call) and _is_dynamic_import(node.func) and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                found.append((node.lineno, first.value))
    return found


def _is_dynamic_import(func: ast.expr) -> bool:
    if isinstance(func, ast.Name):
        return func.id in ("__import__", "import_module")
    return isinstance(func, ast.Attribute) and func.attr == "import_module"


def violations(source: str, filename: str = "<source>") -> list[str]:
    return [
        f"{filename}:{line} imports {name}"
        for line, name in imported_modules(source, filename)
        if name.split(".")[0] in FORBIDDEN
    ]


def test_nothing_under_runtime_imports_mcp_or_rath_mcp() -> None:
    files = sorted(RUNTIME.rglob("*.py"))
    assert len(files) > 10, "runtime/ should hold the engine's modules"
    found = [v for path in files for v in violations(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))]
    assert found == [], "runtime/ must not depend on the MCP layer:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "source",
    [
        "import mcp",
        "import mcp.server as s",
        "from mcp.server import MCPServer",
        "import json, rath_mcp.errors",
        "from rath_mcp import tools",
        "def f():\n    from mcp import types\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import rath_mcp\n",
        "import importlib\nimportlib.import_module('mcp.server')",
        "__import__('rath_mcp')",
        "import mcp_types",
    ],
)
def test_the_checker_sees_each_way_of_importing(source: str) -> None:
    assert violations(source)


@pytest.mark.parametrize(
    "source",
    [
        "import mcpx",
        "from . import mcp",
        "from .mcp import x",
        "import runtime.sessions",
        "text = 'import mcp'",
        "from my_mcp_helpers import y",
    ],
)
def test_the_checker_allows_lookalikes(source: str) -> None:
    assert violations(source) == []


# -- the storage seam: drivers live in their backend, layers know no backend, the store knows no layer --

DRIVERS = {
    "sqlite3": "runtime/store/sqlite/",
    "asyncpg": "runtime/store/postgres/",
    "psycopg": "runtime/store/postgres/",
}
DRIVERS |= {"psycopg2": "runtime/store/postgres/", "psycopg_pool": "runtime/store/postgres/"}
LAYERS = sorted(p.parent.name for p in RUNTIME.glob("*/__init__.py") if p.parent.name != "store")
ABOVE_THE_LAYERS = {"runtime/__init__.py", "runtime/runtime.py", "runtime/backend.py"}


def _runtime_files() -> list[tuple[str, str]]:
    return [(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8")) for p in sorted(RUNTIME.rglob("*.py"))]


def driver_violations(filename: str, source: str) -> list[str]:
    """Imports of a database driver outside the backend that owns it."""
    found = []
    for line, name in imported_modules(source, filename):
        home = DRIVERS.get(name.split(".")[0])
        if home is not None and not filename.startswith(home):
            found.append(f"{filename}:{line} imports {name} (only {home} may)")
    return found


def test_no_driver_is_imported_outside_its_backend() -> None:
    found = [v for name, source in _runtime_files() for v in driver_violations(name, source)]
    assert found == [], "a layer must talk to its store protocol, never to a driver:\n" + "\n".join(found)


def test_no_layer_imports_a_backend() -> None:
    found = [
        f"{name}:{line} imports {module}"
        for name, source in _runtime_files()
        if not name.startswith("runtime/store/") and name not in ABOVE_THE_LAYERS
        for line, module in imported_modules(source, name)
        if module == "runtime.store" or module.startswith("runtime.store.")
    ]
    assert found == [], "layers own their store protocols; only the runtime object picks a backend:\n" + "\n".join(
        found
    )


def test_the_store_package_and_the_database_modules_know_no_layer() -> None:
    """``runtime/store`` finds backends by URL and must not import what sits above it; a backend's modules
    implementing a layer's protocol may import that layer (that is "implements"), its database module not."""
    neutral = [
        name
        for name, _ in _runtime_files()
        if name in ("runtime/store/__init__.py", "runtime/store/url.py") or name.endswith("/database.py")
    ]
    assert "runtime/store/sqlite/database.py" in neutral
    sources = dict(_runtime_files())
    found = [
        f"{name}:{line} imports {module}"
        for name in neutral
        for line, module in imported_modules(sources[name], name)
        if module.split(".")[:2] in [["runtime", layer] for layer in LAYERS]
        or module in ("runtime.runtime", "runtime.backend")
    ]
    assert found == [], "\n".join(found)


@pytest.mark.parametrize(
    ("filename", "source", "bad"),
    [
        ("runtime/durable/service.py", "import sqlite3", True),
        ("runtime/memory/store.py", "def f():\n    import asyncpg\n", True),
        ("runtime/store/postgres/pool.py", "import sqlite3", True),
        ("runtime/store/sqlite/database.py", "import sqlite3", False),
        ("runtime/store/postgres/pool.py", "import asyncpg", False),
        ("runtime/durable/service.py", "import sqlite3x", False),
    ],
)
def test_the_driver_checker(filename: str, source: str, bad: bool) -> None:
    assert bool(driver_violations(filename, source)) is bad
