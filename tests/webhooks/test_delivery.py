"""Run notifications against a real HTTP receiver on 127.0.0.1, on SQLite and PostgreSQL.

The receiver checks every signature with its own implementation of the Standard Webhooks spec
(``tests/webhooks/receiver.py``, no code shared with ``runtime.webhooks``). Retries are driven by a
sender with an injected clock and jitter (the runtime's own sender is given a clock that never
reaches a due time), so no test waits for a backoff.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from runtime.durable.plan import compile_workflow
from runtime.errors import InvalidInputError
from runtime.flow.workflow import StepContext, Workflow, step
from runtime.store import StoreURL
from runtime.webhooks.sender import Sender
from runtime.webhooks.store import DELIVERED, FAILED, GONE, PENDING
from runtime.webhooks.targets import WebhookPolicy
from tests.webhooks.conftest import KEY, Clock, last, opened
from tests.webhooks.receiver import Receiver, receiving, verify

pytestmark = pytest.mark.anyio


def checked(receiver: Receiver, n: int) -> dict[str, Any]:
    """Request ``n`` (0-based) verified by the receiver's own implementation of the spec; its JSON body."""
    got = receiver.got[n]
    assert verify(KEY, got.headers, got.body, time.time(), tolerance_s=600)
    assert not verify(KEY, got.headers, got.body + b" ", time.time(), tolerance_s=600)  # the check can fail
    assert got.headers["content-type"] == "application/json" and got.path == "/hook"
    body: dict[str, Any] = json.loads(got.body)
    return body


async def test_a_run_notifies_when_it_waits_on_a_human_and_when_it_ends_signed(
    tmp_path: Path, store_url: StoreURL
) -> None:
    with receiving() as receiver:
        async with opened(tmp_path / "home", store_url) as rt:
            run = await rt.runs.start("approval", input={"draft": "v2 is out"}, notify_url=receiver.url)
            await receiver.wait_for(1)
            waiting = checked(receiver, 0)
            assert waiting["type"] == "run.waiting" and waiting["data"]["run_id"] == run.id
            (asked,) = waiting["data"]["pending_interrupts"]
            assert asked["kind"] == "approval"
            seen = await last(rt, run.id, DELIVERED)
            assert (seen["event"], seen["attempts"], seen["code"]) == ("run.waiting", 1, 200)
            await rt.runs.resolve_interrupt(asked["interrupt_id"], "approve", actor="tester")
            await receiver.wait_for(2)
            ended = checked(receiver, 1)
            assert ended["type"] == "run.succeeded" and ended["data"]["status"] == "succeeded"
            assert ended["data"]["result"]["outcome"] == "approved"
            ids = [r.headers["webhook-id"] for r in receiver.got]
            assert ids[0] != ids[1] and all(i.startswith("msg_") for i in ids)
            assert (await last(rt, run.id, DELIVERED))["webhook_id"] == ids[1]


async def test_a_500_is_tried_again_after_its_backoff_with_the_same_id_and_body(
    tmp_path: Path, store_url: StoreURL
) -> None:
    with receiving(codes=[500]) as receiver:
        async with opened(tmp_path / "home", store_url, own_sender=False) as rt:
            run = await rt.runs.start("echo", input={"message": "hi"}, notify_url=receiver.url)
            assert (await rt.runs.wait(run.id, 20)).status == "succeeded"
            clock = Clock(time.time() + 60)
            sender = Sender(rt.store.webhooks(), rt.webhooks.policy, KEY, clock=clock, jitter=lambda: 0.0)
            ((_, first),) = await sender.send_due()
            assert (first.status, first.code, first.error) == (PENDING, 500, "HTTP 500")
            assert first.next_at == clock.at + 2.5  # 5 s halved by the jitter: the first retry within a minute
            seen = await last(rt, run.id)
            assert (seen["status"], seen["attempts"], seen["code"]) == (PENDING, 1, 500)
            assert seen["next_at"] == clock.at + 2.5
            assert await sender.send_due() == []  # not due yet
            clock.at += 2.5
            ((_, second),) = await sender.send_due()
            assert (second.status, second.code) == (DELIVERED, 200)
            assert len(receiver.got) == 2
            one, two = receiver.got
            assert one.headers["webhook-id"] == two.headers["webhook-id"] == seen["webhook_id"]
            assert one.body == two.body
            assert int(two.headers["webhook-timestamp"]) - int(one.headers["webhook-timestamp"]) in (2, 3)
            assert checked(receiver, 0) == checked(receiver, 1)
            assert checked(receiver, 1)["data"]["result"] == {"echoed": "hi"}
            done = await last(rt, run.id)
            assert (done["status"], done["attempts"], done["code"], done["next_at"]) == (DELIVERED, 2, 200, None)
            clock.at += 86_400
            assert await sender.send_due() == []  # delivered: never again


async def test_a_410_stops_the_tries_and_24_hours_of_failures_give_up(tmp_path: Path, store_url: StoreURL) -> None:
    with receiving(codes=[410, 503]) as receiver:
        async with opened(tmp_path / "home", store_url, own_sender=False) as rt:
            clock = Clock(time.time() + 60)
            sender = Sender(rt.store.webhooks(), rt.webhooks.policy, KEY, clock=clock, jitter=lambda: 0.5)
            gone = await rt.runs.start("echo", input={"message": "a"}, notify_url=receiver.url)
            await rt.runs.wait(gone.id, 20)
            ((_, tried),) = await sender.send_due()
            assert (tried.status, tried.code) == (GONE, 410)
            clock.at += 86_400
            assert await sender.send_due() == [] and len(receiver.got) == 1
            assert (await last(rt, gone.id))["status"] == GONE

            late = await rt.runs.start("echo", input={"message": "b"}, notify_url=receiver.url)
            await rt.runs.wait(late.id, 20)
            clock.at = time.time() + 86_400 - 3  # the last try before 24 h: its retry would come after them
            ((_, given_up),) = await sender.send_due()
            assert (given_up.status, given_up.code) == (FAILED, 503)
            clock.at += 86_400
            assert await sender.send_due() == [] and len(receiver.got) == 2
            assert (await last(rt, late.id))["status"] == FAILED


async def test_a_slow_receiver_is_a_failed_try(tmp_path: Path, store_url: StoreURL) -> None:
    with receiving() as receiver:
        receiver.hold = threading.Event()  # never set: the receiver answers only when the test ends
        async with opened(tmp_path / "home", store_url, own_sender=False) as rt:
            run = await rt.runs.start("echo", input={"message": "hi"}, notify_url=receiver.url)
            await rt.runs.wait(run.id, 20)
            clock = Clock(time.time() + 60)
            sender = Sender(rt.store.webhooks(), rt.webhooks.policy, KEY, clock=clock, timeout_s=0.3)
            ((_, tried),) = await sender.send_due()
            assert (tried.status, tried.code, tried.error) == (PENDING, None, "no answer within 0.3 s")
            assert len(receiver.arrived) == 1 and receiver.got == []


async def test_a_workflow_class_names_its_url_and_a_start_may_name_another(tmp_path: Path, store_url: StoreURL) -> None:
    with receiving() as own, receiving() as other:

        class Notified(Workflow):
            """Fails at once: its class names where each run's end is told."""

            notify_url = own.url

            @step(entry=True)
            async def only(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
                raise RuntimeError("nothing to do")

        async with opened(tmp_path / "home", store_url) as rt:
            rt.workflows.register(Notified)
            first = await rt.runs.start("notified")
            second = await rt.runs.start("notified", notify_url=other.url)
            (to_own,) = await own.wait_for(1)
            (to_other,) = await other.wait_for(1)
            assert json.loads(to_own.body)["data"]["run_id"] == first.id
            assert json.loads(to_other.body)["data"]["run_id"] == second.id
            assert checked(own, 0)["type"] == "run.failed" and "nothing to do" in checked(own, 0)["data"]["error"]
        with pytest.raises(InvalidInputError, match="notify_url = 'ftp://x'; give an https:// URL"):

            class Wrong(Notified):
                notify_url = "ftp://x"

            compile_workflow(Wrong)


async def test_a_scheduled_run_of_a_workflow_naming_a_url_notifies_it(tmp_path: Path, store_url: StoreURL) -> None:
    with receiving() as receiver:

        class Nightly(Workflow):
            """Says good night."""

            notify_url = receiver.url

            @step(entry=True)
            async def only(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
                return {"said": "good night"}

        class Refused(Nightly):
            """Names a URL this server may not notify."""

            notify_url = "https://10.0.0.1/hook"

        async with opened(tmp_path / "home", store_url) as rt:
            rt.workflows.register(Nightly)
            rt.workflows.register(Refused)
            with pytest.raises(InvalidInputError, match=r"resolves to 10\.0\.0\.1"):
                await rt.schedules.create("refused", "0 3 * * *")
            made = await rt.schedules.create("nightly", "0 3 * * *")
            rt.ticker.clock = Clock(made["next_at"])
            await rt.ticker.fire_due()  # (or the runtime's own ticker, on the same clock, fires it first)
            runs, _ = await rt.runs.list(limit=10)
            (run_id,) = [r.id for r in runs if r.schedule_id == made["schedule_id"]]
            await receiver.wait_for(1)
            body = checked(receiver, 0)
            assert body["type"] == "run.succeeded" and body["data"]["run_id"] == run_id
            assert body["data"]["schedule_id"] == made["schedule_id"]


async def test_a_backlog_is_sent_batch_after_batch_without_waiting(tmp_path: Path, store_url: StoreURL) -> None:
    with receiving() as receiver:
        async with opened(tmp_path / "home", store_url, own_sender=False) as rt:
            runs = [await rt.runs.start("echo", input={"message": f"m{i}"}, notify_url=receiver.url) for i in range(20)]
            for run in runs:
                await rt.runs.wait(run.id, 20)
            sender = Sender(
                rt.store.webhooks(), rt.webhooks.policy, KEY, clock=Clock(time.time() + 60), interval_s=3600
            )
            async with anyio.create_task_group() as tg:
                tg.start_soon(sender.run)  # looks once, and again only an hour later unless a batch was full
                got = await receiver.wait_for(20)
                tg.cancel_scope.cancel()
            assert len({r.headers["webhook-id"] for r in got}) == 20


async def test_each_try_checks_the_url_again_under_the_senders_policy(tmp_path: Path, store_url: StoreURL) -> None:
    with receiving() as receiver:
        async with opened(tmp_path / "home", store_url, own_sender=False) as rt:
            run = await rt.runs.start("echo", input={"message": "hi"}, notify_url=receiver.url)
            await rt.runs.wait(run.id, 20)
            stricter = Sender(rt.store.webhooks(), WebhookPolicy(), KEY, clock=Clock(time.time() + 60))
            ((_, tried),) = await stricter.send_due()  # a sender not naming 127.0.0.1 (or its DNS changed)
            assert (tried.status, tried.code) == (PENDING, None)
            assert "plain http: use https, or name the host '127.0.0.1'" in (tried.error or "")
            assert receiver.arrived == []
