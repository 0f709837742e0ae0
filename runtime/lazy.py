"""Package namespaces whose names are imported when first used (PEP 562 module ``__getattr__``).

A stdio server is started by its host at every launch, and a shell command such as
``rath-mcp runs list`` should not pay for the agent stack, the sandboxes or the model providers
it never touches. So ``runtime`` (and its subpackages that gather many modules) name where each
public name lives, and the module holding it is imported only when the name is first looked up;
the value is then kept in the package's namespace, so later lookups are plain attribute reads.
Type checkers see the ordinary imports each package keeps under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


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
