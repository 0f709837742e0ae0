"""Optional features and the ``rath-mcp`` extras that install them: the one way an optional import is made.

A feature whose dependency is not installed is a usage error naming the extra to install, in one
line (``pip install 'rath-mcp[postgres]'``), never a ``ModuleNotFoundError`` that reads like a bug.
Every optional dependency is imported through ``require_extra``; ``EXTRAS`` lists each extra of
``pyproject.toml`` (but ``test``) with the feature it brings, and a test keeps the two in step.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from runtime.errors import UsageError

#: extra of the ``rath-mcp`` distribution -> the feature it brings (the words of the error).
EXTRAS: dict[str, str] = {
    "postgres": "the PostgreSQL store (postgresql://… store URLs)",
    "otel": "tracing (OTEL_EXPORTER_OTLP_ENDPOINT: OpenTelemetry traces over OTLP/HTTP)",
    "embeddings": "semantic memory recall (--embedder local or openai)",
    "s3": "the S3 artifact store (s3://BUCKET/PREFIX artifact URLs)",
    "litellm": "the litellm model provider (RATH_PROVIDER=litellm, models named provider/model)",
}


class MissingExtraError(UsageError):
    """A feature was asked for whose extra is not installed; the message names the extra."""

    def __init__(self, extra: str, module: str) -> None:
        feature = EXTRAS.get(extra, f"the {extra} feature")
        super().__init__(
            f"{feature} needs the {extra!r} extra, which is not installed (no module {module!r}): "
            f"pip install 'rath-mcp[{extra}]'"
        )
        self.extra = extra
        self.module = module


def require_extra(module: str, extra: str) -> ModuleType:
    """Import ``module`` (a dependency of ``extra``); ``MissingExtraError`` when it is not installed.

    Only the module itself (or a parent package of it) missing means the extra is absent; an import
    error from inside an installed module is a real failure and propagates unchanged.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if exc.name is None or not (module == exc.name or module.startswith(f"{exc.name}.")):
            raise
        raise MissingExtraError(extra, module) from None
