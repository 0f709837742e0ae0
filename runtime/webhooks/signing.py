"""The Standard Webhooks signature (https://www.standardwebhooks.com): what a receiver checks.

Headers ``webhook-id`` (the same on every try of one message), ``webhook-timestamp`` (UNIX seconds of
this try) and ``webhook-signature: v1,<base64 of HMAC-SHA256(secret, "{id}.{timestamp}.{body}")>``.
The secret is ``$RATH_WEBHOOK_SECRET``: in the spec's ``whsec_<base64>`` form its base64 part is the
key (what receivers' libraries decode too), otherwise its own bytes are. Several secrets separated by
spaces (a rotation: the new one first) each sign every message, and the header lists each signature,
space-separated, as the spec says: a receiver holding either secret verifies it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from collections.abc import Sequence

from runtime.errors import InvalidInputError

SECRET_ENV = "RATH_WEBHOOK_SECRET"
PREFIX = "whsec_"
MIN_KEY_BYTES = 16


def parse_secret(text: str) -> bytes:
    """The HMAC key a secret names: ``whsec_<base64>`` decoded, else the text's own bytes."""
    if text.startswith(PREFIX):
        try:
            key = base64.b64decode(text[len(PREFIX) :], validate=True)
        except (binascii.Error, ValueError):
            raise InvalidInputError(
                f"{SECRET_ENV} starts with {PREFIX} but the rest is not base64: give {PREFIX} followed by the "
                "base64 of 24 to 64 random bytes"
            ) from None
    else:
        key = text.encode()
    if len(key) < MIN_KEY_BYTES:
        raise InvalidInputError(f"{SECRET_ENV} is too short: give at least {MIN_KEY_BYTES} bytes of secret")
    return key


def secret_from_env(environ: dict[str, str] | None = None) -> tuple[bytes, ...] | None:
    """The keys in ``$RATH_WEBHOOK_SECRET``, one per space-separated secret (None when unset or empty)."""
    text = (os.environ if environ is None else environ).get(SECRET_ENV, "")
    return tuple(parse_secret(part) for part in text.split()) or None


def signature(key: bytes, msg_id: str, timestamp: int, body: bytes) -> str:
    """``v1,<base64 HMAC-SHA256>`` of ``{id}.{timestamp}.{body}``."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def headers(keys: Sequence[bytes], msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three Standard Webhooks headers of one try: a signature per key, space-separated."""
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": " ".join(signature(key, msg_id, timestamp, body) for key in keys),
    }
