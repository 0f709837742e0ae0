"""The layering rule: ``runtime/`` knows nothing of MCP; imports point down only.

Every file under ``runtime/`` is parsed with ``ast`` (not grepped), so imports inside functions,
``if TYPE_CHECKING`` blocks and ``importlib.import_module("…")`` calls with a literal name all count.
"""

from __future__ import annotations

import ast
import graphlib
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


def test_the_stores_know_no_workflow_semantics() -> None:
    """A store speaks the records of the protocols it implements (``Decision`` is in ``runtime.durable.models``),
    never the workflow definitions of ``runtime.flow`` above them."""
    found = [
        f"{name}:{line} imports {module}"
        for name, source in _runtime_files()
        if name.startswith("runtime/store/")
        for line, module in imported_modules(source, name)
        if module == "runtime.flow" or module.startswith("runtime.flow.")
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


# -- no import circles: every module of runtime/ and rath_mcp/ can be read (and loaded) bottom up --


def module_name(filename: str) -> str:
    """``runtime/durable/store.py`` -> ``runtime.durable.store``; a package's ``__init__.py`` is the package."""
    parts = list(Path(filename).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(sources: dict[str, str]) -> dict[str, set[str]]:
    """Module -> the modules among ``sources`` (filename -> text) it imports, however: at the top, inside a
    function or under ``if TYPE_CHECKING`` (a circle a type checker needs is still a circle a reader climbs).

    ``from package import name`` points at ``package.name`` when that is a module, else at the package;
    relative imports are resolved. Importing a submodule is not counted as importing its parent packages:
    ours load their names lazily (``runtime.lazy``), so a parent's ``__init__`` imports nothing when it runs.
    """
    names = {module_name(f): f for f in sources}
    graph: dict[str, set[str]] = {}
    for name, filename in names.items():
        package = name if filename.endswith("__init__.py") else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(sources[filename], filename=filename)):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, *([node.module] if node.module else [])])
                found.update(f"{base}.{a.name}" if f"{base}.{a.name}" in names else base for a in node.names)
            elif isinstance(node, ast.Call) and _is_dynamic_import(node.func) and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    found.add(first.value)
        graph[name] = {m for m in found if m in names and m != name}
    return graph


def import_circle(sources: dict[str, str]) -> list[str]:
    """One circle of imports among ``sources`` (``[a, b, a]``: a imports b imports a), or ``[]``."""
    try:
        graphlib.TopologicalSorter(import_graph(sources)).prepare()
    except graphlib.CycleError as exc:
        return list(reversed(exc.args[1]))  # graphlib lists a circle from the imported end
    return []


def test_no_import_circles() -> None:
    sources = {
        str(path.relative_to(ROOT)): path.read_text(encoding="utf-8")
        for top in ("runtime", "rath_mcp")
        for path in sorted((ROOT / top).rglob("*.py"))
    }
    circle = import_circle(sources)
    assert circle == [], "an import circle (TYPE_CHECKING imports count): " + " -> ".join(circle)


UNDER_TYPE_CHECKING = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from p.a import A\n"


@pytest.mark.parametrize(
    ("sources", "circle"),
    [
        ({"p/a.py": "import p.b", "p/b.py": "import p.c", "p/c.py": ""}, False),
        ({"p/a.py": "import p.b", "p/b.py": "import p.a"}, True),
        ({"p/a.py": "from p import b", "p/b.py": "def f():\n    from p.a import x\n"}, True),
        ({"p/a.py": "from .b import x", "p/b.py": UNDER_TYPE_CHECKING}, True),
        ({"p/q/a.py": "from .. import b", "p/b.py": "import importlib\nimportlib.import_module('p.q.a')"}, True),
        ({"p/__init__.py": "from p.a import x", "p/a.py": "x = 1"}, False),
        ({"p/__init__.py": "", "p/a.py": "from p import x", "p/b.py": "import p.a"}, False),
    ],
)
def test_the_circle_checker(sources: dict[str, str], circle: bool) -> None:
    assert bool(import_circle(sources)) is circle
