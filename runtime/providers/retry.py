"""Retries with exponential backoff for provider calls that failed in a retryable way (429, 5xx, network).

The vendor SDKs are built with ``max_retries=0`` and this one loop retries for all of them, so the
policy (how often, how long, honouring ``Retry-After``) is the same whichever vendor answers and
can be tested against a real local server.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import anyio

from runtime.providers.base import DeltaCallback, ProviderError, redact

T = TypeVar("T")
RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})


@dataclass(frozen=True)
class RetryPolicy:
    """How many times to retry and how long to wait: ``base_delay_s * 2**attempt`` with jitter, capped."""

    max_retries: int = 3
    base_delay_s: float = 0.5
    max_delay_s: float = 20.0
    jitter: float = 0.2

    def delay(self, attempt: int, retry_after_s: float | None = None) -> float:
        """Seconds to wait before retry number ``attempt`` (0-based)."""
        if retry_after_s is not None and retry_after_s >= 0:
            return min(retry_after_s, self.max_delay_s)
        raw: float = self.base_delay_s * 2.0**attempt
        spread = raw * self.jitter
        return max(0.0, min(self.max_delay_s, raw + random.uniform(-spread, spread)))


class RetryableFailure(Exception):
    """Raised inside a provider call to ask the loop for another attempt."""

    def __init__(self, error: ProviderError, retry_after_s: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.retry_after_s = retry_after_s


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header in its delta-seconds form (dates are ignored)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def failure_of(
    provider: str, exc: Exception, *, secret: str | None, connection_error: bool, retry_ok: bool, url: str = ""
) -> Exception:
    """An SDK error as a ``ProviderError`` (wrapped in ``RetryableFailure`` when worth retrying).

    ``connection_error``: the SDK says the request never got an answer (always worth a retry); the
    message then names ``url``, the endpoint tried (without credentials), which is what to check.
    ``retry_ok``: false once text has been streamed to the caller, so a retry would repeat it.
    """
    status = getattr(exc, "status_code", None)
    detail = redact(str(exc), [secret])
    if connection_error and status is None and url:
        detail = f"the connection to {url} failed ({detail}); check that a server answers there, or fix the base URL"
    error = ProviderError(
        f"{provider}: {detail}" + (f" (HTTP {status})" if status else ""),
        provider=provider,
        status=status,
        retryable=status in RETRYABLE_STATUS or connection_error,
    )
    if not error.retryable:
        return error
    if not retry_ok:
        return ProviderError(
            f"{error}; the stream broke after text had been streamed, so it was not retried",
            provider=provider,
            status=status,
            retryable=True,
        )
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    return RetryableFailure(error, parse_retry_after(headers.get("retry-after")) if headers is not None else None)


async def with_retries(call: Callable[[], Awaitable[T]], policy: RetryPolicy) -> T:
    """Run ``call``; on ``RetryableFailure`` wait and try again, up to ``policy.max_retries`` times.

    The last failure is raised as its ``ProviderError`` with the attempt count in the message.
    """
    attempt = 0
    while True:
        try:
            return await call()
        except RetryableFailure as failure:
            if attempt >= policy.max_retries:
                err = failure.error
                raise ProviderError(
                    f"{err} (gave up after {attempt + 1} attempt{'s' if attempt else ''})",
                    provider=err.provider,
                    status=err.status,
                    retryable=True,
                ) from None
            await anyio.sleep(policy.delay(attempt, failure.retry_after_s))
            attempt += 1


async def complete_with_retries(
    provider: str,
    plain: Callable[[], Awaitable[T]],
    streamed: Callable[[DeltaCallback], Awaitable[T]],
    on_delta: DeltaCallback | None,
    *,
    policy: RetryPolicy,
    secret: str | None,
    errors: tuple[type[Exception], ...],
    connection_errors: tuple[type[Exception], ...],
    url: str = "",
) -> T:
    """One provider call under ``policy``: ``plain()``, or ``streamed(relay)`` when there is ``on_delta``.

    An exception of ``errors`` is translated by ``failure_of`` (``connection_errors`` are the ones
    that got no answer, and name ``url``); a streamed attempt is not retried once text has gone through ``relay``.
    """

    async def attempt() -> T:
        relayed = False

        async def relay(text: str) -> None:
            nonlocal relayed
            relayed = True
            assert on_delta is not None
            await on_delta(text)

        try:
            return await (plain() if on_delta is None else streamed(relay))
        except errors as exc:
            connection = isinstance(exc, connection_errors)
            raise failure_of(
                provider, exc, secret=secret, connection_error=connection, retry_ok=not relayed, url=url
            ) from None

    return await with_retries(attempt, policy)
