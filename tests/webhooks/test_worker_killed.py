"""A notification a worker process was sending when it was SIGKILLed is sent by another worker process.

Worker A drives a run to its end and claims its notification; the receiver holds A's request
unanswered and the test kills A there. Worker B, started after, takes the delivery once A's claim
runs out (three times a try's limit: ``RATH_WEBHOOK_TIMEOUT_S=3`` here) and sends it under the same
``webhook-id``; the record shows one try (A never recorded its own).
"""

from __future__ import annotations

import os
import signal
import threading
from functools import partial
from pathlib import Path

import pytest

from runtime import Runtime
from runtime.store import StoreURL
from tests.cli.serving import rath_argv, running
from tests.webhooks.conftest import KEY, last
from tests.webhooks.receiver import receiving, verify

pytestmark = pytest.mark.anyio


def worker_argv(home: Path, url: StoreURL) -> list[str]:
    return rath_argv(
        "worker", "--home", str(home), "--store", url.url, "--workers", "1", "--allow-webhook-hosts", "127.0.0.1"
    )


async def test_a_killed_workers_pending_delivery_is_sent_by_another(
    tmp_path: Path, store_url: StoreURL, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RATH_WEBHOOK_TIMEOUT_S", "3")
    with receiving() as receiver:
        receiver.hold = threading.Event()
        async with Runtime.open(tmp_path / "home", store=store_url, workers=0, allow_webhook_hosts="127.0.0.1") as rt:
            assert rt.webhooks.sender is not None
            rt.webhooks.sender.clock = lambda: 0.0  # this process sends nothing: the workers do
            async with running(worker_argv(tmp_path / "a", store_url)) as a:
                await a.line_with(r"^rath-mcp: worker on the store ")
                # A is killed as its request is read, in the receiver's thread: killed from this task once
                # it heard of the request, A's try could run out its 3 s first on a loaded machine, and
                # A would record it (a failed try, then a retry of its own).
                receiver.on_arrival = partial(os.kill, a.process.pid, signal.SIGKILL)
                run = await rt.runs.start("echo", input={"message": "hi"}, notify_url=receiver.url)
                (first,) = await receiver.wait_for(1, answered=False)  # A's try, held unanswered
                await a.process.wait()
                receiver.on_arrival = None
            receiver.hold.set()  # answer from now on
            assert (await rt.runs.get(run.id)).status == "succeeded"
            async with running(worker_argv(tmp_path / "b", store_url)) as b:
                await b.line_with(r"^rath-mcp: worker on the store ")
                arrived = await receiver.wait_for(2, answered=False)
                seen = await last(rt, run.id, "delivered")
            second = arrived[1]
            assert second.headers["webhook-id"] == first.headers["webhook-id"] == seen["webhook_id"]
            assert second.body == first.body
            assert verify(KEY, second.headers, second.body, float(second.headers["webhook-timestamp"]))
            assert (seen["attempts"], seen["code"]) == (1, 200)  # A's try was never recorded: B's is the one
            assert len(receiver.arrived) == 2
