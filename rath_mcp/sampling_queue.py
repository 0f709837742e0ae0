"""Sampling for 2026-07-28 clients: model calls handed out inside ``InputRequiredResult``.

The 2026-07-28 protocol has no server-to-client requests, so a run's model call cannot be sent to
the client directly. Instead it waits here until a client that declared sampling is waiting on a
run (``run_start``/``run_wait``/``delegate``): that tool call returns an ``InputRequiredResult``
carrying the ``sampling/createMessage`` request, the client's SDK asks its model and retries the
call with the answer, and the answer is handed back to the waiting model call.
"""

from __future__ import annotations

import os
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
    handed_out: bool = False
    done: anyio.Event = field(default_factory=anyio.Event)
    result: CreateMessageResultWithTools | None = None


class SamplingQueue:
    """Model calls waiting for a 2026-07-28 client to answer them."""

    def __init__(self, answer_wait_s: float = ANSWER_WAIT_S) -> None:
        self.answer_wait_s = answer_wait_s
        self._pending: dict[str, _Pending] = {}
        self._waiters = 0
        self._arrived = anyio.Event()

    @property
    def has_waiters(self) -> bool:
        """Whether a sampling-capable 2026-07-28 client is waiting on a run right now."""
        return self._waiters > 0

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """Mark a sampling-capable client's wait (model calls queue only while someone may answer)."""
        self._waiters += 1
        try:
            yield
        finally:
            self._waiters -= 1

    # -- the model call's side -------------------------------------------------------------
    async def ask(self, request: ModelRequest) -> CreateMessageResultWithTools:
        """Queue ``request`` and wait for a client's answer (at most ``answer_wait_s``)."""
        key = KEY_PREFIX + os.urandom(8).hex()
        pending = self._pending[key] = _Pending(request)
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
    async def arrived(self) -> None:
        """Return once a model call is waiting that no client has been handed yet."""
        while not any(not p.handed_out for p in self._pending.values()):
            self._arrived = anyio.Event()
            await self._arrived.wait()

    def take(self) -> dict[str, ModelRequest]:
        """The model calls no client has been handed yet (now handed to the caller)."""
        taken = {k: p.request for k, p in self._pending.items() if not p.handed_out}
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
