"""Secret references: ``secret://NAME`` resolved only at the moment of use, and never written anywhere.

``config.json`` names each secret and where its value is read from::

    {"secrets": {"GITHUB_TOKEN": "env:GITHUB_TOKEN", "DB_PASSWORD": "file:/run/secrets/db"}}

A step asks ``await ctx.secret("GITHUB_TOKEN")``; an agent's ``run_command`` maps a variable of the
command's environment to ``"secret://GITHUB_TOKEN"``. Each asks ``Secrets.resolve``, which reads the
source then (a changed variable or file is seen by the next use) and hands the value to the runtime's
``Redactor``. Nothing keeps a value but that redactor, in memory, for the life of the process.

Where text leaves code that may hold a value for a place that keeps or shows it, it goes through the
redactor, which writes ``secret://NAME`` in place of each value resolved in this process:

- a sandboxed command's output, before it becomes a tool result (``runtime.flow.tools``): what the
  agent, its session, the effect ledger and every MCP reply see;
- a step's outcome, before the run's commit (``Runner._drive``): checkpoints, state, the run's result
  and error, the ``step.failed`` event;
- what a step writes through its context (``LiveContext``): effect results and errors, progress and
  text events, interrupt prompts;
- the chunks a step writes to sessions (``SessionService`` create/append);
- log lines (``Redactor.install``: every log record made while a runtime is open).

A value encoded on the way (base64, split across lines) is not recognised: a tool that must never
show its secret should not print it.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from runtime.errors import InvalidInputError

REF = "secret://"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")
CONFIG_FILE = "config.json"


class Redactor:
    """The secret values resolved in this process, each replaced by its ``secret://NAME`` in text."""

    def __init__(self) -> None:
        self._refs: dict[str, str] = {}  # a value (and its JSON-escaped form) -> secret://NAME
        self._pattern: re.Pattern[str] | None = None

    def add(self, name: str, value: str) -> None:
        if not value or value in self._refs:
            return
        ref = REF + name
        self._refs[value] = ref
        escaped = json.dumps(value)[1:-1]  # how it reads inside JSON text already serialized
        if escaped != value:
            self._refs.setdefault(escaped, ref)
        # longest first: a value that contains another is replaced whole
        self._pattern = re.compile("|".join(re.escape(v) for v in sorted(self._refs, key=len, reverse=True)))

    def __bool__(self) -> bool:
        return self._pattern is not None

    def text(self, text: str) -> str:
        """``text`` with every known value replaced (the same object when there is nothing to replace)."""
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(lambda m: self._refs[m.group(0)], text)

    def value(self, value: Any) -> Any:
        """A JSON-like value with every string in it (keys too) redacted."""
        if self._pattern is None:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(k) if isinstance(k, str) else k: self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self.value(v) for v in value)
        return value

    def install(self) -> Callable[[], None]:
        """Redact every log record made in this process from now on, whichever handler writes it
        (the record factory: handlers added later are covered too); returns what undoes it."""
        previous = logging.getLogRecordFactory()
        active = True

        def make(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            if active and self._pattern is not None:
                record.msg, record.args = self.text(record.getMessage()), None
                if record.exc_info:  # formatted now, redacted: handlers use exc_text as it is
                    record.exc_text = self.text(logging.Formatter().formatException(record.exc_info))
            return record

        def uninstall() -> None:
            nonlocal active
            active = False  # another runtime may have wrapped this factory since: it then passes through
            if logging.getLogRecordFactory() is make:
                logging.setLogRecordFactory(previous)

        logging.setLogRecordFactory(make)
        return uninstall


class Secrets:
    """The secrets ``config.json`` names, resolved on demand; ``redactor`` knows each value resolved."""

    def __init__(self, sources: Mapping[str, str], origin: str, env: Mapping[str, str] | None = None) -> None:
        self.sources = dict(sources)
        self.origin = origin  # where the sources were named, for errors
        self.env = os.environ if env is None else env
        self.redactor = Redactor()
        for name, source in self.sources.items():
            _check_source(name, source, origin)

    @classmethod
    def from_config(cls, home: Path, config: Mapping[str, Any]) -> Secrets:
        """From ``config.json``'s ``secrets`` object (none: no secrets); a malformed one is an error."""
        origin = str(home / CONFIG_FILE)
        given = config.get("secrets", {})
        if not isinstance(given, dict) or not all(isinstance(v, str) for v in given.values()):
            raise InvalidInputError(
                f'"secrets" in {origin} must map names to sources, e.g. {{"TOKEN": "env:TOKEN", "KEY": "file:/path"}}'
            )
        return cls(given, origin)

    def resolve(self, name: str) -> str:
        """The value of secret ``name`` (a bare name or ``secret://NAME``), read from its source now."""
        name = name.removeprefix(REF)
        source = self.sources.get(name)
        if source is None:
            known = ", ".join(sorted(self.sources)) or "none"
            raise InvalidInputError(
                f'unknown secret {name!r} (known: {known}); name it in the "secrets" object of {self.origin}, '
                f'e.g. {{"secrets": {{"{name}": "env:{name}"}}}}'
            )
        kind, _, where = source.partition(":")
        if kind == "env":
            value = self.env.get(where)
            if value is None:
                raise InvalidInputError(
                    f"secret {name!r} reads environment variable {where}, which is not set in the server's environment"
                )
        else:
            try:
                value = Path(where).expanduser().read_text(encoding="utf-8").removesuffix("\n")
            except OSError as exc:
                raise InvalidInputError(
                    f"secret {name!r} reads file {where}, which cannot be read ({exc.strerror}); "
                    f"fix the path in {self.origin}"
                ) from None
        self.redactor.add(name, value)
        return value

    def environment(self, env: Mapping[str, str] | None) -> dict[str, str] | None:
        """A command's environment with each ``secret://NAME`` value resolved (literal values as given)."""
        if env is None:
            return None
        return {k: self.resolve(v) if v.startswith(REF) else v for k, v in env.items()}


def load_secrets(home: Path) -> Secrets:
    """The secrets of a home's ``config.json`` (none when there is no file, or it is not JSON: the
    server reports a broken config.json once, and an unknown secret's error names the file)."""
    path = home / CONFIG_FILE
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        config = {}
    return Secrets.from_config(home, config if isinstance(config, dict) else {})


def _check_source(name: str, source: str, origin: str) -> None:
    if not _NAME.match(name):
        raise InvalidInputError(
            f"secret name {name!r} in {origin} is not valid: use letters, digits, '_', '.', '-' (up to 64)"
        )
    kind, _, where = source.partition(":")
    if kind not in ("env", "file") or not where:
        raise InvalidInputError(
            f"secret {name!r} in {origin} has source {source!r}; write env:VARIABLE or file:/path/to/file"
        )
