"""``WebhookService``: a runtime's run notifications: which URLs it accepts, its key, its outbox, its sender."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runtime.durable.store_shared import Scope
from runtime.errors import InvalidInputError
from runtime.webhooks.sender import Sender, timeout_from_env
from runtime.webhooks.signing import SECRET_ENV
from runtime.webhooks.store import WebhookStore
from runtime.webhooks.targets import WebhookPolicy


class WebhookService:
    """``check`` is what a run start calls on its ``notify_url``; ``sender`` (None without a key) is the
    task the runtime runs to send notifications; ``last`` is what ``run_get`` shows of them."""

    def __init__(self, store: WebhookStore, policy: WebhookPolicy, key: bytes | Sequence[bytes] | None) -> None:
        self.store = store
        self.policy = policy
        self.key = key
        self.sender = Sender(store, policy, key, timeout_s=timeout_from_env()) if key is not None else None

    async def check(self, url: str) -> None:
        """Refuse a URL this runtime could not notify (no key, not https, a private address, ...)."""
        if self.key is None:
            raise InvalidInputError(
                f"notify_url needs a signing secret: set ${SECRET_ENV} (whsec_<base64>, or any secret of 16+ "
                "bytes) in the environment of the server and its workers"
            )
        await self.policy.resolve(url)

    async def last(self, scope: Scope, run_id: str) -> dict[str, Any] | None:
        """The run's latest notification and how its last try went (None: it has none)."""
        return await self.store.last(scope, run_id)
