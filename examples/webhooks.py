"""Notified work: a run POSTs its summary, signed, to a receiver that checks the signature.

The receiver below is a whole webhook receiver (standard library only): it answers 401 to anything
not signed with the secret (or older than five minutes) and 204 to the rest, printing each
notification once. Here it listens on 127.0.0.1, which the runtime is told it may notify (as
``rath-mcp serve --allow-webhook-hosts 127.0.0.1`` would), an approval run notifies it when it waits
on a human and when it ends, and a forged request is refused. It prints:

    notified: msg_… run.waiting run_…
    notified: msg_… run.succeeded run_…
    a forged notification is answered 401

Run it:  python examples/webhooks.py   (uses $RATH_WEBHOOK_SECRET, else a secret it makes for the run)
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import threading
import time
import urllib.error
import urllib.request
from http.client import HTTPMessage
from http.server import BaseHTTPRequestHandler, HTTPServer

import anyio

from runtime import Runtime
from runtime.durable.store_shared import Scope

if not os.environ.get("RATH_WEBHOOK_SECRET"):  # in real use: set it for the server, its workers, the receiver
    os.environ["RATH_WEBHOOK_SECRET"] = "whsec_" + base64.b64encode(os.urandom(32)).decode()
SECRET = os.environ["RATH_WEBHOOK_SECRET"]
KEY = base64.b64decode(SECRET.removeprefix("whsec_")) if SECRET.startswith("whsec_") else SECRET.encode()
TOLERANCE_S = 300  # a message older than this is refused (a replay)
seen: set[str] = set()  # webhook-ids acted on (the same id comes again when a try's answer was lost)


def verified(headers: HTTPMessage, body: bytes) -> bool:
    msg_id = headers.get("webhook-id", "")
    stamp = headers.get("webhook-timestamp", "")
    if not msg_id or not stamp.isdigit() or abs(time.time() - int(stamp)) > TOLERANCE_S:
        return False
    mac = hmac.new(KEY, f"{msg_id}.{stamp}.".encode() + body, hashlib.sha256).digest()
    expected = "v1," + base64.b64encode(mac).decode()
    return any(hmac.compare_digest(sig, expected) for sig in headers.get("webhook-signature", "").split())


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        if not verified(self.headers, body):
            self.send_response(401)
        else:
            msg_id, event = self.headers["webhook-id"], json.loads(body)
            if msg_id not in seen:
                seen.add(msg_id)
                print("notified:", msg_id, event["type"], event["data"]["run_id"], flush=True)
            self.send_response(204)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:  # no access log on stderr
        pass


def forged(url: str) -> int:
    """POST a notification signed with another key: the receiver's answer."""
    stamp, body = str(int(time.time())), b'{"type": "run.succeeded"}'
    mac = hmac.new(b"not the secret", b"msg_x." + stamp.encode() + b"." + body, hashlib.sha256).digest()
    headers = {
        "webhook-id": "msg_x",
        "webhook-timestamp": stamp,
        "webhook-signature": "v1," + base64.b64encode(mac).decode(),
    }
    try:
        with urllib.request.urlopen(urllib.request.Request(url, body, headers)) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as refused:
        return refused.code


async def delivered(rt: Runtime, run_id: str) -> None:
    """Wait until the run's latest notification is delivered (``run_get`` shows it as ``notify``)."""
    scope = Scope(rt.tenant, rt.project)
    while ((await rt.webhooks.last(scope, run_id)) or {}).get("status") != "delivered":  # noqa: ASYNC110 - another task records it
        await anyio.sleep(0.05)


async def main() -> None:
    server = HTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/hook"
    async with Runtime.open(allow_webhook_hosts="127.0.0.1") as rt:
        run = await rt.runs.start("approval", input={"draft": "The picnic is on Saturday."}, notify_url=url)
        with anyio.fail_after(30):
            await delivered(rt, run.id)  # run.waiting: it asks a human
            (question,) = (await rt.runs.get(run.id)).pending_interrupts
            await rt.runs.resolve_interrupt(question.id, "approve", actor="example")
            await rt.runs.wait(run.id, 20)
            await delivered(rt, run.id)  # run.succeeded
    print("a forged notification is answered", forged(url))
    server.shutdown()


if __name__ == "__main__":
    anyio.run(main)
