"""Run a *sync* step in a forked child process, so a timeout or cancel can stop it preemptively.

A thread cannot be stopped from outside in Python; a process can. The child is forked (so it
sees the workflow's code and the state as they are, with nothing to pickle on the way in), runs
the step and sends its result back over a socket pair. Effects the step makes go through the
parent's effect ledger over the same socket (``SyncContext.effect`` asks, the parent answers
"replay this result" or "go", the child runs the function and reports the outcome), so the
ledger's guarantees hold for sync steps too. When the parent's scope is cancelled the child is
killed with SIGKILL at once.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import socket
import struct
import sys
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from runtime.durable.context import LiveContext
from runtime.durable.traced import NO_SPAN, effect_span
from runtime.errors import ControlSignal, InvalidInputError, RunFailure
from runtime.flow.workflow import EffectClass, SyncStepContext
from runtime.telemetry import Span

T = TypeVar("T")
_HEADER = struct.Struct("!I")


def _send(sock: socket.socket, message: Any) -> None:
    data = pickle.dumps(message)
    sock.sendall(_HEADER.pack(len(data)) + data)


def _recv_exact(sock: socket.socket, n: int) -> bytearray:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        part = sock.recv_into(view[got:])
        if not part:
            raise EOFError
        got += part
    return buf


def _recv(sock: socket.socket) -> Any:
    (size,) = _HEADER.unpack(_recv_exact(sock, _HEADER.size))
    return pickle.loads(_recv_exact(sock, size))


class SyncContext(SyncStepContext):
    """The child's side of the context: plain attributes, ledger calls over the socket."""

    def __init__(self, sock: socket.socket, live: LiveContext) -> None:
        self._sock = sock
        self.run_id, self.step, self.attempt, self.visit = live.run_id, live.step, live.attempt, live.visit
        self.session_id, self.input, self.idempotency_key = live.session_id, live.input, live.idempotency_key
        self.output_session_id: str | None = None

    def effect(self, key: str, fn: Callable[[], T], effect_class: EffectClass | str = EffectClass.NON_IDEMPOTENT) -> T:
        cls = EffectClass(effect_class)
        _send(self._sock, ("effect", key, cls.value))
        reply = _recv(self._sock)
        if reply[0] == "error":
            raise RunFailure(reply[1], run_id=self.run_id, step=self.step)
        if reply[0] == "replay":
            return reply[1]  # type: ignore[no-any-return]
        effect_id = reply[1]
        try:
            value = fn()
        except Exception as exc:
            _send(self._sock, ("finish", effect_id, key, cls.value, None, f"{type(exc).__name__}: {exc}"))
            _recv(self._sock)
            raise
        _send(self._sock, ("finish", effect_id, key, cls.value, value, None))
        reply = _recv(self._sock)
        if reply[0] == "error":
            raise RunFailure(reply[1], run_id=self.run_id, step=self.step)
        return reply[1]  # type: ignore[no-any-return]

    def set_output_session(self, session_id: str) -> None:
        self.output_session_id = session_id

    def interrupt(self, *args: Any, **kwargs: Any) -> Any:
        raise InvalidInputError(
            f"step {self.step!r} is a sync step (it runs in a child process) and cannot wait for a human; "
            "make it an async def to use ctx.interrupt"
        )

    def progress(self, message: str) -> None:
        _send(self._sock, ("progress", str(message)))


def _child(sock: socket.socket, fn: Callable[..., Any], state: Any, live: LiveContext) -> None:
    """Body of the forked child; never returns."""
    code = 0
    try:
        with contextlib.suppress(ValueError, OSError):
            signal.set_wakeup_fd(-1)  # the parent's event loop owns that fd
        os.dup2(2, 1)  # a print in a step must never reach a stdio MCP stream the parent speaks on
        sys.stdout = sys.stderr
        ctx = SyncContext(sock, live)
        try:
            value = fn(state, ctx)
            _send(sock, ("ok", value, ctx.output_session_id))
        except BaseException as exc:
            _send(sock, ("raised", type(exc).__name__, str(exc), traceback.format_exc(limit=8)))
    except BaseException:
        code = 1
    finally:
        os._exit(code)


async def _serve(sock: socket.socket, live: LiveContext) -> tuple[Any, str | None]:
    """Answer the child's ledger calls until it sends its result.

    Each effect is asked of config.json's policy and traced here, as ``LiveContext.effect`` does for an
    async step: its span opens at the child's ``effect`` and ends at its ``finish``. A policy that
    parks the run (``require_approval``) ends the step here, the child killed: answered, the step runs
    again and its earlier effects replay, as an async step's do.
    """
    spans: dict[str, Span] = {}  # the child's effect under way, by id (one at a time: the child waits)
    try:
        while True:
            await anyio.wait_readable(sock)
            try:
                message = await anyio.to_thread.run_sync(_recv, sock)
            except EOFError:
                raise RunFailure(
                    "the sync step's process died before returning", run_id=live.run_id, step=live.step
                ) from None
            kind = message[0]
            if kind == "ok":
                return message[1], message[2]
            if kind == "raised":
                raise RunFailure(f"{message[1]}: {message[2]}", run_id=live.run_id, step=live.step)
            if kind == "progress":
                await live.progress(message[1])
                continue
            try:
                if kind == "effect":
                    reply = await _begin(live, message[1], EffectClass(message[2]), spans)
                else:
                    _, effect_id, key, cls, value, error = message
                    span = spans.pop(effect_id, NO_SPAN)
                    try:
                        reply = ("done", await live.finish_effect(effect_id, key, EffectClass(cls), value, error))
                    finally:
                        span.set("rath.effect.outcome", "failed" if error else "succeeded")
                        if error:
                            span.fail(error.split(":", 1)[0], error)
                        span.__exit__(None, None, None)
            except ControlSignal:  # a park (the policy asked a human): the step ends here
                raise
            except Exception as exc:
                reply = ("error", f"{type(exc).__name__}: {exc}")
            _send(sock, reply)
    finally:
        for span in spans.values():  # the child died or was stopped mid-effect
            span.__exit__(None, None, None)


async def _begin(live: LiveContext, key: str, cls: EffectClass, spans: dict[str, Span]) -> tuple[Any, ...]:
    """The child asks to run effect ``key``: the policy, then the ledger (replay, or go with its id)."""
    await live.gate_effect(key)
    span = effect_span(live.tracing, key, cls.value).__enter__()
    try:
        replay, value, effect_id = await live.begin_effect(key, cls)
    except BaseException as exc:
        span.__exit__(type(exc), exc, exc.__traceback__)
        raise
    span.set("rath.effect.id", effect_id)
    if replay:
        span.set("rath.effect.outcome", "replayed")
        span.__exit__(None, None, None)
        return ("replay", value)
    spans[effect_id] = span
    return ("go", effect_id)


async def run_sync_step(fn: Callable[..., Any], state: Any, live: LiveContext) -> tuple[Any, str | None]:
    """Run ``fn(state, sync_ctx)`` in a forked child; returns ``(value, output_session_id)``.

    Cancelling the caller's scope kills the child (SIGKILL) before this returns.
    """
    parent, child = socket.socketpair()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        parent.close()
        _child(child, fn, state, live)
    child.close()
    try:
        return await _serve(parent, live)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(os.waitpid, pid, 0)
        parent.close()
