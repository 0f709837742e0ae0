"""``Sender``: claims due notifications from the store's outbox, POSTs them signed, records each try.

Every server and worker on a store runs one (with ``$RATH_WEBHOOK_SECRET`` set); which of them sends
a notification does not matter. A claim holds a delivery for ``lease_s`` (``WebhookStore.claim``; three
times a try's time limit, ``$RATH_WEBHOOK_TIMEOUT_S``): a sender that dies mid-try leaves it to another
once that runs out. A try that is not answered with a 2xx is tried again after an exponential backoff
with jitter (``backoff_s``: the first retry comes 2.5 to 7.5 s later), under the same ``webhook-id`` and
with the same body, until 24 h after the run's change (then ``failed``); a ``410 Gone`` ends the tries
at once (``gone``).

A try connects to the address just checked by the policy (``targets``), with no redirects followed,
no proxy from the environment, no connection kept (one is never reused for another host at the same
address), a time limit on the whole try (``timeout_s``: a slow receiver is a failed try) and none of
the receiver's answer read beyond its status line and headers.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import ssl
import time
from collections.abc import Callable, Sequence

import anyio
import httpx

from runtime.errors import InvalidInputError
from runtime.ids import new_id
from runtime.periodic import Periodic
from runtime.webhooks.signing import headers
from runtime.webhooks.store import DELIVERED, FAILED, GONE, PENDING, Attempt, Delivery, WebhookStore
from runtime.webhooks.targets import WebhookPolicy

log = logging.getLogger(__name__)

TIMEOUT_ENV = "RATH_WEBHOOK_TIMEOUT_S"
TIMEOUT_S = 10.0
"""A try not answered within this long fails (default; ``$RATH_WEBHOOK_TIMEOUT_S``)."""
FIRST_BACKOFF_S = 5.0
MAX_BACKOFF_S = 3600.0
KEEP_S = 7 * 86_400.0
"""Deliveries that are over are kept this long (``run_get`` shows a run's latest), then pruned."""
PRUNE_EVERY_S = 3600.0
BATCH = 16
"""Deliveries claimed (and sent at once) per look at the store."""


def timeout_from_env(environ: dict[str, str] | None = None) -> float:
    """``$RATH_WEBHOOK_TIMEOUT_S`` (seconds a receiver has to answer a try), else ``TIMEOUT_S``."""
    text = (os.environ if environ is None else environ).get(TIMEOUT_ENV, "")
    try:
        value = float(text) if text else TIMEOUT_S
    except ValueError:
        value = -1.0
    if not 0 < value <= 300:
        raise InvalidInputError(f"{TIMEOUT_ENV} must be a number of seconds from 0 to 300, got {text!r}")
    return value


def backoff_s(attempts: int, jitter: float) -> float:
    """Seconds before the next try after ``attempts`` failed ones: doubling from ``FIRST_BACKOFF_S`` up to
    ``MAX_BACKOFF_S``, times 0.5 to 1.5 (``jitter`` in [0, 1)) so that receivers coming back are not hit
    by every sender at once."""
    return float(min(FIRST_BACKOFF_S * 2 ** (max(attempts, 1) - 1), MAX_BACKOFF_S) * (0.5 + jitter))


class Sender:
    def __init__(
        self,
        store: WebhookStore,
        policy: WebhookPolicy,
        key: bytes | Sequence[bytes],
        *,
        clock: Callable[[], float] = time.time,
        jitter: Callable[[], float] = random.random,
        interval_s: float = 1.0,
        timeout_s: float = TIMEOUT_S,
        verify: ssl.SSLContext | bool = True,
    ) -> None:
        self.store = store
        self.policy = policy
        self.keys = (key,) if isinstance(key, bytes) else tuple(key)  # each signs every message (a rotation)
        self.clock = clock  # tries are stamped, and due, on this clock (tests inject one)
        self.jitter = jitter
        self.timeout_s = timeout_s
        self.verify = verify  # how receivers' certificates are checked (default: the system's CAs; tests give theirs)
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{new_id('snd')}"
        self._pruned_at = 0.0
        failed = "could not send the run notifications that are due"
        self.periodic = Periodic(self.send_and_prune, interval_s, failed=failed, log=log)

    @property
    def lease_s(self) -> float:
        """How long a claim holds a delivery: three times a try's limit, so only a sender gone (or hung) loses it."""
        return 3 * self.timeout_s

    def wake(self) -> None:
        """Something may be due: look now."""
        self.periodic.wake()

    async def run(self) -> None:
        """Send what is due, then look again every ``interval_s`` (or when woken); until cancelled."""
        await self.periodic.run()

    async def send_and_prune(self) -> bool:
        """One look: send what is due, and prune what is over once in ``PRUNE_EVERY_S``; True when the
        batch was full (a backlog: the next look comes at once)."""
        if len(await self.send_due()) == BATCH:
            return True
        if self.clock() - self._pruned_at >= PRUNE_EVERY_S:
            self._pruned_at = self.clock()
            await self.store.prune(self._pruned_at - KEEP_S)
        return False

    async def send_due(self) -> list[tuple[Delivery, Attempt]]:
        """Claim what is due now and try each once (at the same time); what each try recorded."""
        at = self.clock()
        if not await self.store.has_due(at):
            return []
        claimed = await self.store.claim(self.owner, at, self.lease_s, BATCH)
        done: list[tuple[Delivery, Attempt]] = []

        async def one(delivery: Delivery) -> None:
            attempt = await self.attempt(delivery)
            if await self.store.record(delivery, attempt):
                done.append((delivery, attempt))

        async with anyio.create_task_group() as tg:
            for delivery in claimed:
                tg.start_soon(one, delivery)
        return done

    async def attempt(self, delivery: Delivery) -> Attempt:
        """One try of ``delivery``: how it ended, and when to try next."""
        code: int | None = None
        error: str | None = None
        try:
            with anyio.fail_after(self.timeout_s):
                code = await self._post(delivery)
        except TimeoutError:
            error = f"no answer within {self.timeout_s:g} s"
        except InvalidInputError as exc:  # the URL's host now resolves where it may not go
            error = str(exc)
        except Exception as exc:  # the transport's errors, and any other: a failed try, recorded and retried
            if not isinstance(exc, httpx.HTTPError):
                log.exception("run %s notification %s: unexpected error", delivery.run_id, delivery.id)
            error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        at = self.clock()
        if code is not None and 200 <= code < 300:
            return Attempt(DELIVERED, at, code, None, at)
        if code == 410:
            return Attempt(GONE, at, code, "the receiver answered 410 Gone: no more tries", at)
        if code is not None:
            error = f"HTTP {code}"
        next_at = at + backoff_s(delivery.attempts + 1, self.jitter())
        status = PENDING if next_at <= delivery.expires_at else FAILED
        log.info("run %s notification %s not delivered (%s)", delivery.run_id, delivery.id, error)
        return Attempt(status, next_at, code, error, at)

    async def _post(self, delivery: Delivery) -> int:
        target = await self.policy.resolve(delivery.url)
        body = delivery.body.encode()
        sent = {
            **headers(self.keys, delivery.id, int(self.clock()), body),
            "content-type": "application/json",
            "host": target.host_header(),
            "user-agent": "rath-mcp-webhooks",
        }
        extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
        fresh = httpx.Limits(max_keepalive_connections=0)
        client = httpx.AsyncClient(trust_env=False, follow_redirects=False, limits=fresh, verify=self.verify)
        async with client:
            request = client.build_request(
                "POST", target.connect_url(), content=body, headers=sent, extensions=extensions,
                timeout=self.timeout_s,
            )  # fmt: skip
            response = await client.send(request, stream=True)
            await response.aclose()  # its body is never read
            return response.status_code
