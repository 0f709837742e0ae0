"""``FlowToolCall``: a callable operation with a JSON schema (the ``Function`` of the OpenRath analogy).

A tool is a name, a description, a JSON schema of its arguments, an async callable and an optional
``resource_key``. The agent runs calls that touch different resources in parallel and calls that
share one in order. ``run_tool_calls`` does that and turns every failure into a typed result the
model can read (``invalid_arguments``, ``unknown_tool``, ``execution_error``, ``denied`` by a
policy) instead of an exception that would end the run; cancellation and control signals (interrupts) still propagate.

Given a ``journal`` (inside a durable step: ``ctx.effect``), each call runs as an effect of the
tool's ``effect_class``: when the step runs again (a resume after an interrupt, a retry after a
crash) a call that completed is replayed from the ledger, not executed a second time.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import anyio

from runtime.artifacts.model import LARGE_RESULT_BYTES
from runtime.errors import ControlSignal, InvalidInputError, RathError, UsageError
from runtime.policy import PolicyDenied
from runtime.providers.base import ToolSpec
from runtime.sandbox.base import CommandResult, Sandbox
from runtime.secrets import Redactor, Secrets
from runtime.sessions.model import Chunk, ToolCall

ToolFn = Callable[..., Awaitable[str | dict[str, Any] | list[Any]]]
ToolErrorKind = Literal["invalid_arguments", "unknown_tool", "execution_error", "denied"]
EffectKind = Literal["none", "read_only", "idempotent", "non_idempotent"]
MAX_RESULT_CHARS = 50_000
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class Journal(Protocol):
    """Runs ``fn`` once under ``key`` and records its JSON result (``StepContext.effect`` is one)."""

    def __call__(self, key: str, fn: Callable[[], Awaitable[Any]], effect_class: str, /) -> Awaitable[Any]: ...


class ToolGate(Protocol):
    """Decides, before a call runs, whether it may (``runtime.flow.policy_gate`` enforces config.json's
    policy): returns the arguments to run it with, raises ``PolicyDenied`` to refuse it, or parks the
    run on an interrupt (a control signal) until a human decides. ``input_trust``: the trust labels of
    what the model had read when it asked for the call."""

    def __call__(
        self, tool: FlowToolCall, call: ToolCall, arguments: dict[str, Any], key: str, input_trust: frozenset[str], /
    ) -> Awaitable[dict[str, Any]]: ...


async def unjournaled(key: str, fn: Callable[[], Awaitable[Any]], effect_class: str, /) -> Any:
    """The journal of a plain (non-durable) run: just call ``fn``."""
    return await fn()


class ToolExecutionError(RathError):
    """Raised by a tool to report a failure the model should see (becomes an ``execution_error`` result)."""


@dataclass(frozen=True)
class FlowToolCall:
    """A tool an agent may call: ``fn(**arguments)`` returns text or JSON-able data."""

    name: str
    description: str
    parameters: dict[str, Any]
    fn: ToolFn
    resource_key: str | None = None
    effect_class: EffectKind = "non_idempotent"

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise InvalidInputError(
                f"tool name {self.name!r} is not valid: use 1-64 letters, digits, '_' or '-' (model APIs require it)"
            )
        if self.parameters.get("type") != "object":
            raise InvalidInputError(f"tool {self.name}: parameters must be a JSON schema with type 'object'")
        from jsonschema import SchemaError  # imported on first use: it costs ~50 ms of every cold start
        from jsonschema.validators import Draft202012Validator

        try:
            Draft202012Validator.check_schema(self.parameters)
        except SchemaError as exc:
            raise InvalidInputError(
                f"tool {self.name}: parameters are not a valid JSON schema: {exc.message}"
            ) from None

    def spec(self) -> ToolSpec:
        """What the model is told about this tool."""
        return ToolSpec(self.name, self.description, self.parameters)

    def check_arguments(self, raw: str) -> dict[str, Any]:
        """Parse and validate a call's JSON arguments; ``ToolArgumentsError`` says what is wrong."""
        try:
            args = json.loads(raw or "{}")
        except ValueError as exc:
            raise ToolArgumentsError(f"arguments are not valid JSON ({exc}); send a JSON object") from None
        if not isinstance(args, dict):
            raise ToolArgumentsError(f"arguments must be a JSON object, got {type(args).__name__}")
        from jsonschema.exceptions import best_match
        from jsonschema.validators import Draft202012Validator

        error = best_match(Draft202012Validator(self.parameters).iter_errors(args))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
            raise ToolArgumentsError(f"argument {where}: {error.message}")
        return args


class ToolArgumentsError(UsageError):
    """A tool call's arguments did not parse or did not match the tool's schema."""


@dataclass(frozen=True)
class ToolOutcome:
    """The result of one tool call: its text for the model, and the error kind if it failed."""

    call: ToolCall
    content: str
    error: ToolErrorKind | None = None

    def chunk(self) -> Chunk:
        return Chunk(kind="tool_result", content=self.content, tool_call_id=self.call.id, name=self.call.function.name)


def _render(value: str | dict[str, Any] | list[Any]) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    if len(text) > MAX_RESULT_CHARS:
        cut = len(text) - MAX_RESULT_CHARS
        text = text[:MAX_RESULT_CHARS] + f"\n[... {cut} more characters cut off]"
    return text


def error_outcome(call: ToolCall, kind: ToolErrorKind, message: str) -> ToolOutcome:
    """A typed error result: ``{"error": {"type": kind, "message": ...}}`` as the tool's text."""
    body = {"error": {"type": kind, "message": message, "tool": call.function.name}}
    return ToolOutcome(call, json.dumps(body, ensure_ascii=False), kind)


async def _invoke(tool: FlowToolCall, call: ToolCall, args: dict[str, Any]) -> ToolOutcome:
    try:
        value = await tool.fn(**args)
    except ControlSignal:
        raise
    except (ToolExecutionError, UsageError) as exc:
        return error_outcome(call, "execution_error", str(exc))
    except Exception as exc:  # a tool's own bug must not end the run: the model sees it and may adapt
        return error_outcome(call, "execution_error", f"{type(exc).__name__}: {exc}")
    return ToolOutcome(call, _render(value))


async def _journaled(
    journal: Journal, key: str, tool: FlowToolCall, call: ToolCall, args: dict[str, Any]
) -> ToolOutcome:
    async def execute() -> dict[str, Any]:
        outcome = await _invoke(tool, call, args)
        return {"content": outcome.content, "error": outcome.error}

    recorded = await journal(key, execute, tool.effect_class)
    return ToolOutcome(call, str(recorded["content"]), recorded.get("error"))


async def run_tool_calls(
    tools: Mapping[str, FlowToolCall],
    calls: Sequence[ToolCall],
    *,
    journal: Journal = unjournaled,
    key: str = "tool",
    gate: ToolGate | None = None,
    input_trust: frozenset[str] = frozenset(),
) -> list[ToolOutcome]:
    """Run ``calls``: in parallel across resource keys, in order within one; outcomes in call order.

    Each call is journaled as ``{key}.{index}`` with its tool's effect class. ``gate`` sees every call
    first, one by one in call order, before any runs: a call it holds for approval parks the run with
    none of the round's calls started, and the interrupts of a round come in the same order every time
    the step runs again (each is found by its place in the step).
    """
    outcomes: list[ToolOutcome | None] = [None] * len(calls)
    lanes: dict[str, list[tuple[int, FlowToolCall, dict[str, Any]]]] = {}
    for index, call in enumerate(calls):
        tool = tools.get(call.function.name)
        if tool is None:
            known = ", ".join(sorted(tools)) or "(none)"
            outcomes[index] = error_outcome(
                call, "unknown_tool", f"no tool named {call.function.name!r}; tools: {known}"
            )
            continue
        try:
            args = tool.check_arguments(call.function.arguments)
        except ToolArgumentsError as exc:
            outcomes[index] = error_outcome(call, "invalid_arguments", str(exc))
            continue
        if gate is not None:
            try:
                args = await gate(tool, call, args, f"{key}.{index}", input_trust)
            except PolicyDenied as exc:
                outcomes[index] = error_outcome(call, "denied", str(exc))
                continue
            except ToolArgumentsError as exc:  # a human approved with arguments that do not fit the tool
                outcomes[index] = error_outcome(call, "invalid_arguments", str(exc))
                continue
        lane_key = tool.resource_key if tool.resource_key is not None else f"\x00call-{index}"
        lanes.setdefault(lane_key, []).append((index, tool, args))

    async def run_lane(lane: list[tuple[int, FlowToolCall, dict[str, Any]]]) -> None:
        for index, tool, args in lane:
            outcomes[index] = await _journaled(journal, f"{key}.{index}", tool, calls[index], args)

    try:
        async with anyio.create_task_group() as tg:
            for lane in lanes.values():
                tg.start_soon(run_lane, lane)
    except BaseExceptionGroup as group:
        # A tool's own failure is already a result, so what a lane raises is a control signal (a tool
        # parked the run on an interrupt) or the journal's refusal (a lost lease, an ambiguous effect).
        # It leaves as itself, a signal first, not wrapped in a group: the durable layer tells them by type.
        signals, _ = group.split(ControlSignal)
        raise _first_leaf(signals or group) from None
    return [o for o in outcomes if o is not None]


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first


def tool_map(tools: Sequence[FlowToolCall]) -> dict[str, FlowToolCall]:
    """Tools by name; two tools with one name is an error (the model could not tell them apart)."""
    out: dict[str, FlowToolCall] = {}
    for tool in tools:
        if tool.name in out:
            raise InvalidInputError(f"two tools are named {tool.name!r}; give each tool a distinct name")
        out[tool.name] = tool
    return out


# -- built-in sandbox tools -------------------------------------------------------------------
MAX_TIMEOUT_S = 300.0
_PATH = {"type": "string", "description": "a path relative to the workspace root, e.g. 'src/main.py'"}
_TIMEOUT = {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_TIMEOUT_S, "default": 30}
_ENV = {
    "type": "object",
    "maxProperties": 32,
    "propertyNames": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]{0,63}$"},
    "additionalProperties": {"type": "string", "maxLength": 4096},
}


def _command_result(
    result: CommandResult, redactor: Redactor | None = None, kept: Mapping[str, dict[str, Any]] | None = None
) -> dict[str, Any]:
    """A command's result for the model, always valid JSON within ``MAX_RESULT_CHARS``.

    ``kept``: the artifacts holding a whole stream too long to show (``stdout``/``stderr`` → its
    ``artifact_id``, ``uri``, ``size``), named in the result as ``stdout_artifact``/``stderr_artifact``.

    Its output is where a command's secrets (``run_command``'s ``env``) would leave the sandbox: each
    value resolved in this process reads ``secret://NAME`` (``runtime.secrets``) before it is kept or shown.

    Long output is cut inside its own field (stdout first, then stderr, each keeping its start), never
    across the JSON text, so ``exit_code``, ``timed_out``, ``truncated``, ``limit`` and ``duration_s`` survive.
    """
    body: dict[str, Any] = {
        "exit_code": result.exit_code,
        "stdout": redactor.text(result.stdout) if redactor else result.stdout,
        "stderr": redactor.text(result.stderr) if redactor else result.stderr,
        "timed_out": result.timed_out,
        "truncated": result.truncated,
        "limit": result.limit,
        "duration_s": round(result.duration_s, 3),
    }
    for f, artifact in (kept or {}).items():
        body[f"{f}_artifact"] = artifact
    sizes = {f: _json_len(body[f]) for f in ("stdout", "stderr")}
    room = MAX_RESULT_CHARS - len(json.dumps({**body, "stdout": "", "stderr": ""}, ensure_ascii=False))
    if sum(sizes.values()) <= room:
        return body
    # Each stream gets half the room, and what one does not need goes to the other.
    small, large = sorted(sizes, key=lambda f: sizes[f])
    budgets = {small: min(sizes[small], room // 2)}
    budgets[large] = room - budgets[small]
    for f in ("stdout", "stderr"):
        if sizes[f] > budgets[f]:
            body[f] = _cut(body[f], budgets[f])
            body["truncated"] = True
    return body


def _json_len(text: str) -> int:
    """Characters ``text`` takes inside a JSON string (escapes counted), quotes excluded."""
    return len(json.dumps(text, ensure_ascii=False)) - 2


def _cut(text: str, budget: int) -> str:
    """The longest start of ``text`` that, with the cut-off marker, fits ``budget`` JSON characters."""
    low, high = 0, len(text)
    while low < high:  # binary search: escapes make the JSON length of a prefix non-uniform
        mid = (low + high + 1) // 2
        if _json_len(text[:mid] + _CUT_MARKER.format(len(text) - mid)) <= budget:
            low = mid
        else:
            high = mid - 1
    return text[:low] + _CUT_MARKER.format(len(text) - low)


_CUT_MARKER = "\n[... {} more characters cut off; redirect the output to a file and read it in parts]"


KeepOutput = Callable[[str, str], Awaitable[dict[str, Any]]]
"""Keeps a command's whole output stream (its text, a name such as ``run_command-stdout.txt``) as an
artifact; the artifact's metadata (``artifact_id``, ``uri``, ``size``…)."""


def sandbox_tools(
    sandbox: Sandbox, secrets: Secrets | None = None, keep_output: KeepOutput | None = None
) -> list[FlowToolCall]:
    """The built-in tools over one ``Sandbox``: read/write/list files, path exists, run command, run code.

    ``secrets``: what ``run_command``'s ``env`` resolves ``secret://NAME`` with (none given: no secrets).
    ``keep_output``: where a stream over ``LARGE_RESULT_BYTES`` goes whole (the result shows its start
    and names the artifact); none given: it is only cut.

    They share one resource key (the workspace), so one agent turn's calls on a workspace run in the
    order the model gave them: a write before a command that reads the file is seen by the command.
    """
    key = f"sandbox:{sandbox.backend}:{sandbox.workspace}"

    async def read_file(path: str) -> str:
        return (await sandbox.read_file(path)).decode("utf-8", errors="replace")

    async def write_file(path: str, content: str) -> str:
        await sandbox.write_file(path, content)
        return f"wrote {len(content.encode('utf-8'))} bytes to {path}"

    async def list_files(path: str = ".") -> dict[str, Any]:
        entries = await sandbox.list_dir(path)
        return {"path": path, "entries": [{"name": e.name, "is_dir": e.is_dir, "size": e.size} for e in entries]}

    async def path_exists(path: str) -> dict[str, Any]:
        return {"path": path, "exists": bool(await sandbox.exists(path))}

    known = secrets if secrets is not None else Secrets({}, "config.json (these tools were given no secrets)")

    async def run_command(
        command: str, timeout_s: float = 30.0, stdin: str | None = None, env: dict[str, str] | None = None
    ) -> dict[str, Any]:
        full_env = known.environment(env)  # secret://NAME resolved now, into the command's environment only
        result = await sandbox.run_command(command, stdin=stdin, env=full_env, timeout_s=timeout_s)
        return await shown("run_command", result)

    async def run_code(code: str, language: str = "python", timeout_s: float = 30.0) -> dict[str, Any]:
        return await shown("run_code", await sandbox.run_code(code, language=language, timeout_s=timeout_s))

    async def shown(tool: str, result: CommandResult) -> dict[str, Any]:
        """The result for the model; a stream over ``LARGE_RESULT_BYTES`` kept whole first, when it can be."""
        kept: dict[str, dict[str, Any]] = {}
        for f in ("stdout", "stderr") if keep_output is not None else ():
            text = known.redactor.text(getattr(result, f))
            if len(text.encode("utf-8")) > LARGE_RESULT_BYTES:
                artifact = await keep_output(text, f"{tool}-{f}.txt")  # type: ignore[misc]
                kept[f] = {k: artifact[k] for k in ("artifact_id", "uri", "size")}
        return _command_result(result, known.redactor, kept)

    def obj(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
        return {"type": "object", "properties": props, "required": required, "additionalProperties": False}

    text = {"type": "string"}
    return [
        FlowToolCall(
            "read_file",
            "Read a text file from the workspace.",
            obj({"path": _PATH}, ["path"]),
            read_file,
            key,
            "read_only",
        ),
        FlowToolCall(
            "write_file",
            "Write a text file in the workspace (creating parent directories, replacing any old content).",
            obj({"path": _PATH, "content": text}, ["path", "content"]),
            write_file,
            key,
            "idempotent",  # the same content written again leaves the same file
        ),
        FlowToolCall(
            "list_files",
            "List a workspace directory (sorted by name).",
            obj({"path": _PATH}, []),
            list_files,
            key,
            "read_only",
        ),
        FlowToolCall(
            "path_exists",
            "Whether a file or directory exists in the workspace.",
            obj({"path": _PATH}, ["path"]),
            path_exists,
            key,
            "read_only",
        ),
        FlowToolCall(
            "run_command",
            "Run a shell command in the workspace; returns exit code, stdout and stderr. env: extra environment "
            "variables, each a literal string or secret://NAME (a configured secret, resolved for this command only; "
            "its value shows as secret://NAME in the output).",
            obj({"command": text, "timeout_s": _TIMEOUT, "stdin": text, "env": _ENV}, ["command"]),
            run_command,
            key,
        ),
        FlowToolCall(
            "run_code",
            "Run a snippet of code in the workspace (python by default); returns exit code, stdout and stderr.",
            obj({"code": text, "language": {"type": "string", "default": "python"}, "timeout_s": _TIMEOUT}, ["code"]),
            run_code,
            key,
        ),
    ]
