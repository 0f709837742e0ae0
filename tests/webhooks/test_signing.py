"""The signature against the Standard Webhooks reference test vector (the one its reference libraries
test with), so a receiver's library verifies what we send; and the secret's two forms."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from runtime.errors import InvalidInputError
from runtime.webhooks.signing import headers, parse_secret, secret_from_env, signature
from tests.webhooks.receiver import key_of, verify

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
MSG_ID, STAMP, BODY = "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, b'{"test": 2432232314}'
EXPECTED = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_the_reference_vector_is_reproduced_and_verified() -> None:
    key = parse_secret(SECRET)
    assert signature(key, MSG_ID, STAMP, BODY) == EXPECTED
    sent = headers((key,), MSG_ID, STAMP, BODY)
    assert sent == {"webhook-id": MSG_ID, "webhook-timestamp": str(STAMP), "webhook-signature": EXPECTED}
    assert verify(key_of(SECRET), sent, BODY, STAMP)  # the tests' own verifier agrees with the reference
    assert not verify(key_of(SECRET), sent, BODY, STAMP + 301)  # too old: a replay


def test_a_secret_without_the_prefix_is_its_own_bytes() -> None:
    raw = "a plain secret of enough bytes"
    key = parse_secret(raw)
    assert key == raw.encode()
    mac = hmac.new(raw.encode(), f"{MSG_ID}.{STAMP}.".encode() + BODY, hashlib.sha256).digest()
    assert signature(key, MSG_ID, STAMP, BODY) == "v1," + base64.b64encode(mac).decode()
    assert secret_from_env({"RATH_WEBHOOK_SECRET": "whsec_c2VjcmV0IG9mIDE2IGJ5dGVzIQ=="}) == (b"secret of 16 bytes!",)
    assert secret_from_env({}) is None and secret_from_env({"RATH_WEBHOOK_SECRET": ""}) is None


@pytest.mark.parametrize(
    ("text", "message"),
    [("whsec_***", "not base64"), ("whsec_c2hvcnQ=", "too short"), ("short", "too short")],
)
def test_a_bad_secret_is_refused_saying_why(text: str, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        parse_secret(text)


def test_a_rotation_signs_with_each_secret_and_either_verifies() -> None:
    old, new = SECRET, "whsec_" + base64.b64encode(b"the new secret, 24 bytes").decode()
    keys = secret_from_env({"RATH_WEBHOOK_SECRET": f"{new}  {old}"})
    assert keys == (key_of(new), key_of(old))
    sent = headers(keys, MSG_ID, STAMP, BODY)
    new_sig, old_sig = sent["webhook-signature"].split(" ")
    assert old_sig == EXPECTED and new_sig.startswith("v1,")
    assert verify(key_of(old), sent, BODY, STAMP) and verify(key_of(new), sent, BODY, STAMP)
    assert not verify(b"neither of them, 24 bytes", sent, BODY, STAMP)
