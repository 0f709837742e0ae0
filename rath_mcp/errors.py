"""The one place runtime errors become MCP errors.

The SDK shows a plain exception raised in a tool only as ``Error executing tool X`` (its text is
withheld on purpose, since it may be a crash). Our runtime's usage errors are written for the
caller to read ("what was wrong and how to fix it"), so they are re-raised here as ``ToolError`` /
``ResourceError``, whose text reaches the client. Anything else stays a crash: logged on the
server with its traceback, never leaked to the client.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, ParamSpec, TypeVar

from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS

from runtime.errors import RathError, RunFailure, StoreError, UsageError

P = ParamSpec("P")
R = TypeVar("R")
AsyncFn = Callable[P, Awaitable[R]]


def describe(exc: RathError) -> str:
    """The one-line text a caller sees for a runtime error."""
    if isinstance(exc, RunFailure) and exc.run_id:
        where = f"run {exc.run_id}" + (f" step {exc.step}" if exc.step else "")
        return f"{exc} ({where})"
    if isinstance(exc, StoreError):
        return f"the store could not do this: {exc}; retry, or check the server's log"
    return str(exc)


@contextmanager
def resource_errors(arguments: Iterable[Any] = ()) -> Iterator[None]:
    """Turn runtime errors raised while reading a resource into MCP resource errors (quoting little of
    ``arguments``, the URI's parts)."""
    try:
        yield
    except UsageError as exc:  # an id that is not an id names no resource either: Invalid params, like a missing one
        raise ResourceNotFoundError(clip_quotes(str(exc), arguments)) from exc
    except (RunFailure, StoreError) as exc:
        raise ResourceError(clip_quotes(describe(exc), arguments)) from exc


@contextmanager
def protocol_errors(arguments: Iterable[Any] = ()) -> Iterator[None]:
    """Turn runtime errors into JSON-RPC errors, for handlers without an error result (prompts, subscribe).

    The SDK replaces any other exception from a prompt with a generic text; ``MCPError`` passes through.
    """
    try:
        yield
    except UsageError as exc:
        raise MCPError(INVALID_PARAMS, clip_quotes(str(exc), arguments)) from exc
    except (RunFailure, StoreError) as exc:
        raise MCPError(INTERNAL_ERROR, clip_quotes(describe(exc), arguments)) from exc


def _translating(
    errors: Callable[[Iterable[Any]], AbstractContextManager[None]],
) -> Callable[[AsyncFn[P, R]], AsyncFn[P, R]]:
    """A decorator running an async handler inside ``errors(its arguments)`` (keeps the signature the SDK
    reads for schemas)."""

    def decorate(fn: AsyncFn[P, R]) -> AsyncFn[P, R]:
        @functools.wraps(fn)
        async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            with errors(kwargs.values()):
                return await fn(*args, **kwargs)

        return wrapper

    return decorate


translate_prompt = _translating(protocol_errors)
"""Decorator form of :func:`protocol_errors`."""


def translate_tool(fn: AsyncFn[P, R]) -> AsyncFn[P, R]:
    """Turn runtime errors raised inside a tool into readable ``isError`` results (a plain ``try``, not a
    context manager: every tool call passes it, and a ``try`` costs less than entering a generator)."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(*args, **kwargs)
        except (UsageError, RunFailure, StoreError) as exc:
            raise ToolError(clip_quotes(describe(exc), kwargs.values())) from exc

    return wrapper


QUOTE_CHARS = 200
"""The most of one argument's value an error quotes (CONTRACT §4)."""


def clip_quotes(text: str, arguments: Iterable[Any]) -> str:
    """``text`` with every quote of a long string of ``arguments`` (at any depth) cut to ``QUOTE_CHARS``.

    A runtime error may quote what it refused (``no session 'ses_…'``, a schema check naming the
    value). The arguments' bounds keep most quotes short; this keeps every one short, in any of the
    spellings an error quotes a string in (as is, ``repr``, JSON).
    """
    if len(text) <= QUOTE_CHARS:
        return text
    for value in _long_strings(arguments):
        for form in {value, repr(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]}:
            if len(form) > QUOTE_CHARS and form in text:
                text = text.replace(form, _clipped(form, len(value)))
    # A part of an argument (an id inside an import's text, say) quoted as a Python or JSON string.
    return _LONG_QUOTE.sub(lambda m: m[1] + _clipped(m[2], len(m[2])) + m[1], text)


_LONG_QUOTE = re.compile(rf"""(['"])([^'"\n]{{{QUOTE_CHARS + 1},}})\1""")


def _clipped(quote: str, length: int) -> str:
    return f"{quote[: QUOTE_CHARS - 40]}… ({length} characters)"


def _long_strings(values: Iterable[Any]) -> Iterator[str]:
    stack = list(values)
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if len(item) > QUOTE_CHARS:
                yield item
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)


translate_resource = _translating(resource_errors)
"""Decorator form of :func:`resource_errors`."""


_VALIDATION_HEAD = re.compile(r"^Error executing tool (?P<tool>[\w.-]+): \d+ validation errors? for \S+$")
_PYDANTIC_DETAIL = re.compile(r"\s*\[type=.*\]\s*$")
_WRONG_TYPE = re.compile(r"\[type=\w+_type,.*input_type=(?P<sent>\w+)\]\s*$")
#: What a JSON value read by the SDK is called in JSON (pydantic reports Python's names).
_JSON_TYPE = {"str": "a string", "int": "an integer", "float": "a number", "bool": "a boolean"}
_JSON_TYPE |= {"dict": "an object", "list": "an array", "NoneType": "null"}
_PYTHON_WORDS: tuple[tuple[str, str], ...] = (("a valid dictionary", "an object"), ("a valid list", "an array"))
_PYTHON_WORDS += (("a valid integer", "an integer"), ("a valid", "a"))


def concise_validation_text(text: str, accepted: Mapping[str, Sequence[str]] | None = None) -> str:
    """pydantic's argument-validation report, rewritten as what was wrong and how to fix it.

    The SDK validates tool arguments before our code runs and reports pydantic's multi-line text
    (with input values and documentation links). An argument the tool does not declare is named
    with the ones it does (``accepted``: each tool's argument names). Anything not in that shape is
    returned as is.
    """
    lines = text.splitlines()
    head = _VALIDATION_HEAD.match(lines[0]) if lines else None
    if head is None:
        return text
    tool = head.group("tool")
    names = list((accepted or {}).get(tool, ()))
    problems: list[str] = []
    unknown: list[str] = []
    field = "arguments"
    for line in lines[1:]:
        if line.startswith("    For further information"):
            continue
        if line.startswith("  "):
            if "type=extra_forbidden" in line:
                unknown.append(field)
            else:
                problems.append(f"{field}: {_problem(line.strip())}")
        else:
            field = line.strip() or field
    if unknown:
        takes = ", ".join(names) if names else "none"
        problems.insert(
            0,
            f"{tool} has no argument {_names(unknown)} (check the spelling; it takes: {takes})",
        )
    return (
        f"invalid arguments for {tool}: " + "; ".join(problems) + f". Fix them and call {tool} again "
        "(its inputSchema lists every argument, its type and its limits)."
    )


def _problem(line: str) -> str:
    """One of pydantic's problem lines in JSON's words, without the input it quotes; a wrong type says what came."""
    wrong = _WRONG_TYPE.search(line)
    text = _PYDANTIC_DETAIL.sub("", line)
    if wrong is not None:
        for python, json_word in _PYTHON_WORDS:
            text = text.replace(python, json_word)
        sent = _JSON_TYPE.get(wrong.group("sent"))
        text += f", not {sent}" if sent else ""
    return text


def _names(fields: list[str]) -> str:
    quoted = [repr(f) for f in fields]
    return quoted[0] if len(quoted) == 1 else "s " + ", ".join(quoted)


def concise_validation_errors(accepted: Mapping[str, Sequence[str]]) -> ServerMiddleware[Any]:
    """Middleware: rewrite argument-validation failures of ``tools/call`` with :func:`concise_validation_text`."""

    async def rewrite(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        if ctx.method != "tools/call" or not isinstance(result, dict) or not result.get("isError"):
            return result
        content = result.get("content")
        if isinstance(content, list) and content and isinstance(content[0], dict) and "text" in content[0]:
            first = {**content[0], "text": concise_validation_text(str(content[0]["text"]), accepted)}
            result = {**result, "content": [first, *content[1:]]}
        return result

    return rewrite
