"""``rt.workflows``: the workflows a runtime knows, by name, compiled once when registered."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from runtime.durable.plan import Plan, compile_workflow
from runtime.errors import ConflictError, InvalidInputError, NotFoundError
from runtime.flow.workflow import Workflow


class WorkflowRegistry:
    """Compiled plans by workflow name. Registration compiles, so a bad definition fails here."""

    def __init__(self) -> None:
        self._plans: dict[str, Plan] = {}

    def register(self, target: type[Workflow] | Workflow, *, replace: bool = False) -> Plan:
        """Compile and register a workflow class or instance; returns its plan.

        Registering the same definition twice is a no-op; a *different* definition under a known
        name is refused unless ``replace=True``.
        """
        plan = compile_workflow(target)
        old = self._plans.get(plan.name)
        if old is not None and old.plan_hash != plan.plan_hash and not replace:
            raise ConflictError(
                f"a different workflow named {plan.name!r} is already registered; "
                "rename one (class attribute name = '...') or pass replace=True"
            )
        if old is None or replace or old.plan_hash != plan.plan_hash:
            self._plans[plan.name] = plan
        return self._plans[plan.name]

    def names(self) -> list[str]:
        return sorted(self._plans)

    def limits(self) -> dict[str, int]:
        """Workflow name -> its ``concurrency`` limit, for the workflows that have one."""
        return {name: plan.concurrency for name, plan in self._plans.items() if plan.concurrency is not None}

    def get(self, name: str) -> Plan:
        try:
            return self._plans[name]
        except KeyError:
            raise NotFoundError(f"no workflow named {name!r}; known workflows: {self.names()}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._plans

    def describe(self) -> list[dict[str, Any]]:
        return [self._plans[n].describe() for n in self.names()]

    def load(self, module_or_file: str) -> list[str]:
        """Import a module name or a ``.py`` file and register every Workflow subclass defined in it."""
        module = _import(module_or_file)
        names = []
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, Workflow) and obj is not Workflow and obj.__module__ == module.__name__:
                if inspect.isabstract(obj) or obj.__dict__.get("abstract", False):
                    continue
                names.append(self.register(obj).name)
        if not names:
            raise InvalidInputError(
                f"{module_or_file} defines no Workflow subclass; define one deriving from runtime.Workflow"
            )
        return sorted(names)


def _import(target: str) -> ModuleType:
    path = Path(target)
    if target.endswith(".py") or path.is_file():
        if not path.is_file():
            raise NotFoundError(f"workflow file {target} does not exist; give a .py file path or a module name")
        name = f"rath_workflows_{path.stem}_{abs(hash(str(path.resolve()))):x}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise InvalidInputError(f"cannot import {target} as Python")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            del sys.modules[name]
            raise InvalidInputError(f"could not load workflows from {target}: {_why(exc)}; fix the file") from exc
        return module
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (target == exc.name or target.startswith(exc.name + ".")):
            raise NotFoundError(
                f"cannot import workflow module {target!r} ({exc}); give a module name or a .py file path"
            ) from None
        raise InvalidInputError(f"could not load workflows from module {target}: {_why(exc)}") from exc
    except Exception as exc:  # the module exists but fails as it is imported: a bad file, reported in one line
        raise InvalidInputError(f"could not load workflows from module {target}: {_why(exc)}; fix it") from exc


def _why(exc: Exception) -> str:
    """An import failure in one line: the error, and for a syntax error where it is."""
    if isinstance(exc, SyntaxError):
        return f"SyntaxError: {exc.msg} ({exc.filename}, line {exc.lineno})"
    return f"{type(exc).__name__}: {exc}"
