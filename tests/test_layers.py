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
