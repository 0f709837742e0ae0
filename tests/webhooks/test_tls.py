"""An https notification goes to the address the policy checked, with the URL's host in the TLS
handshake (SNI, certificate check) and in ``Host``: a real TLS receiver with a certificate for
``localhost`` only, made here and trusted by the test's sender (``verify``).

The URL naming ``localhost`` is delivered; the same receiver named by its address (which the
certificate does not name) is refused by the certificate check, a failed try to be retried.
"""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
import time
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from runtime.store import StoreURL
from runtime.webhooks.sender import Sender
from runtime.webhooks.store import DELIVERED, PENDING
from tests.webhooks.conftest import KEY, Clock, opened
from tests.webhooks.receiver import receiving, verify

pytestmark = pytest.mark.anyio


def certificate(tmp_path: Path, name: str) -> tuple[Path, Path, bytes]:
    """A self-signed certificate for ``name`` (its own CA): cert file, key file, cert PEM."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    pem = cert.public_bytes(serialization.Encoding.PEM)
    (tmp_path / "cert.pem").write_bytes(pem)
    (tmp_path / "key.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return tmp_path / "cert.pem", tmp_path / "key.pem", pem


async def test_https_goes_to_the_checked_address_under_the_urls_host_name(tmp_path: Path, store_url: StoreURL) -> None:
    cert, key, pem = certificate(tmp_path, "localhost")
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)
    trusted = ssl.create_default_context(cadata=pem.decode())
    first = socket.getaddrinfo("localhost", 0, type=socket.SOCK_STREAM)[0][4][0]  # where the sender connects
    with receiving(tls=served, host=first, name="localhost") as receiver:
        by_address = receiver.url.replace("localhost", f"[{first}]" if ":" in first else first)
        async with opened(tmp_path / "home", store_url, own_sender=False, hosts=f"localhost,{first}") as rt:
            named = await rt.runs.start("echo", input={"message": "hi"}, notify_url=receiver.url)
            unnamed = await rt.runs.start("echo", input={"message": "hi"}, notify_url=by_address)
            for run in (named, unnamed):
                assert (await rt.runs.wait(run.id, 20)).status == "succeeded"
            sender = Sender(rt.store.webhooks(), rt.webhooks.policy, KEY, clock=Clock(time.time() + 60), verify=trusted)
            tries = {delivery.run_id: attempt for delivery, attempt in await sender.send_due()}
    assert (tries[named.id].status, tries[named.id].code) == (DELIVERED, 200)
    assert tries[unnamed.id].status == PENDING and tries[unnamed.id].code is None
    assert "certificate" in (tries[unnamed.id].error or "").lower(), tries[unnamed.id].error
    (got,) = receiver.got
    assert got.headers["host"] == f"localhost:{receiver.url.split(':')[2].split('/')[0]}"
    assert verify(KEY, got.headers, got.body, time.time(), tolerance_s=600)
    assert ipaddress.ip_address(first).is_loopback
