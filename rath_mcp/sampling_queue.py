"""Sampling for 2026-07-28 clients: model calls handed out inside ``InputRequiredResult``.

The 2026-07-28 protocol has no server-to-client requests, so a run's model call cannot be sent to
the client directly. Instead it waits here until a client that declared sampling is waiting on a
run (``run_start``/``run_wait``/``delegate``): that tool call returns an ``InputRequiredResult``
carrying the ``sampling/createMessage`` request, the client's SDK asks its model and retries the
call with the answer, and the answer is handed back to the waiting model call.

A model call made by a run is handed only to a client waiting on *that* run: one client's model
never sees another client's run.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import anyio
from mcp_types import CreateMessageResult, CreateMessageResultWithTools

from runtime.providers import ModelRequest, ProviderError

ANSWER_WAIT_S = 120.0
KEY_PREFIX = "sampling:"


@dataclass
class _Pending:
    request: ModelRequest
    run_id: str | None
    handed_out: bool = False
    done: anyio.Event = field(default_factory=anyio.Event)
    result: CreateMessageResultWithTools | None = None


class SamplingQueue:
    """Model calls waiting for a 2026-07-28 client to answer them."""

    def __init__(self, answer_wait_s: float = ANSWER_WAIT_S) -> None:
        self.answer_wait_s = answer_wait_s
        self._pending: dict[str, _Pending] = {}
        self._waiters: Counter[str] = Counter()  # run id -> clients waiting on it
        self._arrived = anyio.Event()

    @property
    def has_waiters(self) -> bool:
        """Whether a sampling-capable 2026-07-28 client is waiting on any run right now."""
        return any(self._waiters.values())

    def waits_on(self, run_id: str | None) -> bool:
        """Whether such a client is waiting on this run right now."""
        return run_id is not None and self._waiters[run_id] > 0

    @contextmanager
    def waiting(self, run_id: str) -> Iterator[None]:
        """Mark a sampling-capable client's wait on a run (it may answer that run's model calls)."""
        self._waiters[run_id] += 1
        try:
            yield
        finally:
            self._waiters[run_id] -= 1
            if not self._waiters[run_id]:
                del self._waiters[run_id]

    # -- the model call's side -------------------------------------------------------------
    async def ask(self, request: ModelRequest, run_id: str | None = None) -> CreateMessageResultWithTools:
        """Queue ``request`` of ``run_id`` and wait for a client's answer (at most ``answer_wait_s``)."""
        key = KEY_PREFIX + os.urandom(8).hex()
        pending = self._pending[key] = _Pending(request, run_id)
        self._arrived.set()
        try:
            with anyio.move_on_after(self.answer_wait_s):
                await pending.done.wait()
        finally:
            del self._pending[key]
        if pending.result is None:
            raise ProviderError(
                f"sampling: no client answered within {self.answer_wait_s:.0f} s; keep a client that offers "
                "sampling waiting on the run (run_wait), or use another provider",
                provider="sampling",
            )
        return pending.result

    # -- the waiting tool call's side ------------------------------------------------------
    def _open_for(self, run_id: str) -> list[str]:
        """Keys of calls not handed out yet that a client waiting on ``run_id`` may answer."""
        return [k for k, p in self._pending.items() if not p.handed_out and p.run_id in (None, run_id)]

    async def arrived(self, run_id: str) -> None:
        """Return once a model call of ``run_id`` is waiting that no client has been handed yet."""
        while not self._open_for(run_id):
            if self._arrived.is_set():
                self._arrived = anyio.Event()
            await self._arrived.wait()

    def take(self, run_id: str) -> dict[str, ModelRequest]:
        """The model calls of ``run_id`` no client has been handed yet (now handed to the caller)."""
        taken = {k: self._pending[k].request for k in self._open_for(run_id)}
        for key in taken:
            self._pending[key].handed_out = True
        return taken

    def answer(self, key: str, result: CreateMessageResult | CreateMessageResultWithTools) -> None:
        """A client's answer to a handed-out call (ignored when that call gave up meanwhile)."""
        pending = self._pending.get(key)
        if pending is not None and not pending.done.is_set():
            pending.result = CreateMessageResultWithTools.model_validate(result.model_dump(by_alias=True))
            pending.done.set()

    def release(self, keys: list[str]) -> None:
        """Handed-out calls the client came back without answering: offer them again."""
        for key in keys:
            pending = self._pending.get(key)
            if pending is not None and not pending.done.is_set():
                pending.handed_out = False
                self._arrived.set()
