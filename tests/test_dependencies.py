"""Dependencies: each runtime one is imported by the code that ships, each import the shipped code
makes is declared (a runtime dependency, or the extra it needs), and the README says why each is there."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _name(requirement: str) -> str:
    """The normalized distribution name of a requirement (``pyjwt[crypto]>=2.10`` -> ``pyjwt``)."""
    match = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match[0]).lower()


def _distributions_imported() -> dict[str, set[str]]:
    """Each distribution the shipped packages import (a top-level module outside the standard library),
    with the files that import it."""
    owners = importlib.metadata.packages_distributions()
    found: dict[str, set[str]] = {}
    for path in sorted([*(ROOT / "runtime").rglob("*.py"), *(ROOT / "rath_mcp").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top in sys.stdlib_module_names or top in ("runtime", "rath_mcp", "__future__"):
                    continue
                assert top in owners, f"{path.relative_to(ROOT)} imports {top}, which no installed package provides"
                for dist in _providers(module, owners[top]):
                    found.setdefault(_name(dist), set()).add(str(path.relative_to(ROOT)))
    return found


def _providers(module: str, candidates: list[str]) -> list[str]:
    """The distributions that hold ``module`` itself: of a namespace package several distributions share
    (``opentelemetry``), only those with files under the module's own path."""
    if len(candidates) == 1:
        return candidates
    prefix = module.replace(".", "/")
    holding = [
        dist
        for dist in candidates
        if any(str(f).startswith((prefix + "/", prefix + ".py")) for f in importlib.metadata.files(dist) or [])
    ]
    return holding or candidates


RUNTIME = {_name(r) for r in PYPROJECT["dependencies"]}
EXTRAS = {extra: {_name(r) for r in reqs} for extra, reqs in PYPROJECT["optional-dependencies"].items()}


def test_every_runtime_dependency_is_imported_by_the_shipped_code() -> None:
    imported = _distributions_imported()
    assert sorted(RUNTIME - set(imported)) == [], "declared but never imported: move it to the extra that uses it"


def test_every_import_of_the_shipped_code_is_declared() -> None:
    """Only the PostgreSQL store and tracing import packages of an extra (``runtime.extras`` names it when missing)."""
    imported = _distributions_imported()
    undeclared = {
        dist: sorted(imported[dist]) for dist in set(imported) - RUNTIME - EXTRAS["postgres"] - EXTRAS["otel"]
    }
    assert undeclared == {}, "imported but not a runtime dependency"


def test_the_readme_says_why_each_dependency_is_there() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Dependencies\n", 1)[1].split("\n## ", 1)[0]
    named = {_name(m) for m in re.findall(r"`([A-Za-z0-9._\[\]-]+)`", section)}
    everything = RUNTIME.union(*EXTRAS.values())
    assert sorted(everything - named) == []
