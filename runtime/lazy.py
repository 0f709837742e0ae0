"""Package namespaces whose names are imported when first used (PEP 562 module ``__getattr__``).

A stdio server is started by its host at every launch, and a shell command such as
``rath-mcp runs list`` should not pay for the agent stack, the sandboxes or the model providers
it never touches. So ``runtime`` (and its subpackages that gather many modules) name where each
public name lives, and the module holding it is imported only when the name is first looked up;
the value is then kept in the package's namespace, so later lookups are plain attribute reads.

Each such package lists its public names once, as the imports of its ``if TYPE_CHECKING:`` block,
one ``from module import Name as Name`` each (the ``as`` marks an explicit re-export for mypy).
Type checkers read those imports; at run time ``lazy_namespace`` reads the same block from the
package's source and derives the lazy ``__getattr__``, ``__dir__`` and ``__all__`` from it::

    if TYPE_CHECKING:
        from runtime.sessions.model import Chunk as Chunk

    __getattr__, __dir__, __all__ = lazy_namespace(__name__, __file__)
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any


def read_exports(init_file: str) -> dict[str, str]:
    """The public names of the package whose ``__init__.py`` is ``init_file``, each with its module:
    the absolute imports of its top-level ``if TYPE_CHECKING:`` block."""
    tree = ast.parse(Path(init_file).read_text(encoding="utf-8"), init_file)
    exports: dict[str, str] = {}
    for node in tree.body:
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
            continue
        for statement in node.body:
            if not (isinstance(statement, ast.ImportFrom) and statement.level == 0 and statement.module):
                raise ValueError(
                    f"{init_file}:{statement.lineno}: the TYPE_CHECKING block of a lazy package holds only"
                    " absolute `from module import Name as Name` imports (its public names)"
                )
            for alias in statement.names:
                exports[alias.asname or alias.name] = statement.module
    return exports


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``exports`` maps each public name to its module."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__


def lazy_namespace(package: str, init_file: str) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``__getattr__``, ``__dir__`` and ``__all__`` for ``package``, from its ``TYPE_CHECKING`` imports."""
    exports = read_exports(init_file)

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *exports})

    return lazy_exports(package, exports), __dir__, sorted(exports)
