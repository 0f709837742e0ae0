"""The worker loop: claim ready runs with a lease, drive them concurrently, renew, reap.

One ``Worker`` serves up to ``slots`` runs at once. Three loops share its task group: *claim*
(takes ready runs in one transaction, each with a higher fencing token), *renew* (extends every
held lease in one transaction every ``lease_s / 3``, and learns about cancels requested from
other processes: at once when the store's watch tells of one, else every ``poll_s``), and
*reap* (requeues runs whose worker vanished, expires interrupts and deadlines). Any number of
workers, in any number of processes, may share one store.

A worker serves every tenant/project of its store: it claims, takes over and reaps through the
store's ``RunQueue`` (across scopes), and drives each run inside the run's own scope (``Engine.scope``),
so the run's sessions, effects, memory writes and sandbox workspace stay where the run belongs.

A worker vanishes in two ways. One on another machine is known gone only when its lease runs out.
One on this host is known gone the moment its process is: every claim records its holder
(``runtime.durable.owner``), and the reap loop, at once when the worker starts and then on every
round (a read of the holders of running runs in any scope and a look at ``/proc``), takes over the
runs of a holder that has ended, without waiting for its lease. Claims respect each workflow's
``concurrency`` (``RunQueue.claim``'s ``limits``), counted across the whole store, every scope.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Awaitable, Callable, Sequence
from functools import partial

import anyio
from anyio.abc import TaskGroup

from runtime.durable.engine import Engine
from runtime.durable.outage import Outage, once_reachable
from runtime.durable.owner import is_gone, this_process
from runtime.durable.runner import Runner
from runtime.durable.step_call import Lease
from runtime.durable.store import RELEASE, Claim, ClaimOrder, EventSpec, StepCommit
from runtime.errors import CommitUnknownError, LeaseLostError, StoreUnavailableError
from runtime.ids import now

log = logging.getLogger(__name__)
RESTART_S = 1.0


class Worker:
    """Claims and runs durable runs of the runtime's known workflows, in every tenant/project of its store."""

    def __init__(
        self, engine: Engine, *, slots: int = 4, lease_s: float | None = None, poll_s: float | None = None
    ) -> None:
        if slots < 1:
            raise ValueError("a worker needs at least one slot")
        self.engine = engine
        self.slots = slots
        self.lease_s = lease_s if lease_s is not None else engine.lease_s
        self.poll_s = poll_s if poll_s is not None else engine.poll_s
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{os.urandom(3).hex()}"
        self.queue = engine.queue
        self.holder = this_process()  # None where /proc cannot say: then only leases recover our runs
        self.leases: dict[str, Lease] = {}
        self._wake = anyio.Event()
        self._slot_free = anyio.Event()
        self._cancel_asked = anyio.Event()
        self._stopping = False
        self._claiming: anyio.CancelScope | None = None

    def wake(self) -> None:
        """Look for ready runs now (a run was queued in this process)."""
        self._wake.set()

    def cancel_asked(self, run_ids: Sequence[str]) -> None:
        """Another process asked to cancel these runs (``[]``: maybe some): look now if we hold one."""
        if self.leases and (not run_ids or any(run_id in self.leases for run_id in run_ids)):
            self._cancel_asked.set()

    def cancel_local(self, run_id: str, reason: str | None) -> None:
        lease = self.leases.get(run_id)
        if lease is not None:
            lease.cancel(reason)

    async def run(self, stop: anyio.Event | None = None, *, drain_s: float = 5.0) -> None:
        """Serve until ``stop`` is set or the caller's scope is cancelled.

        After ``stop``, no new run is claimed and the runs in hand get ``drain_s`` seconds to
        finish or park; whatever is still running then is stopped and its lease released at
        once (so another worker resumes it without waiting for the lease to expire).
        """
        self.engine.workers.append(self)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_resilient, self._renew_loop, "renew")
                tg.start_soon(_resilient, self._reap_loop, "reap")
                tg.start_soon(_resilient, partial(self._claim_loop, tg), "claim")
                if stop is not None:
                    await stop.wait()
                    self._stop_claiming()
                    with anyio.move_on_after(drain_s):
                        while self.leases:
                            await self._slot_free.wait()
                    tg.cancel_scope.cancel()
        finally:
            self.engine.workers.remove(self)

    # -- claiming ----------------------------------------------------------------------------
    async def claim(self, limit: int) -> list[Claim]:
        """Claim up to ``limit`` ready runs (one transaction). Public for tests and tools."""
        names, limits = self.engine.workflows.names(), self.engine.workflows.limits()
        with anyio.CancelScope(shield=True):  # a claim that commits must reach its caller
            # every scope's ready runs; a limit counts the workflow's running runs in the whole store
            claims = await self.queue.claim(self.owner, self.lease_s, limit, names, holder=self.holder, limits=limits)
        return claims

    async def take_over_ended(self) -> list[str]:
        """Requeue the runs held by processes of this host that have ended (prompt takeover); their ids."""
        if self.holder is None:
            return []
        host, touched = self.holder.host, []
        for pid, started in await self.queue.holders(host):  # in every scope
            if is_gone(pid, started):
                taken = await self.queue.take_over(host, pid, started)
                log.info("took over %d run(s) of ended process %s on this host", len(taken), pid)
                touched += taken
        return touched

    def _stop_claiming(self) -> None:
        self._stopping = True
        if self._claiming is not None:
            self._claiming.cancel()

    async def _claim_loop(self, tg: TaskGroup) -> None:
        if self._stopping:
            return
        with anyio.CancelScope() as self._claiming:
            await self._claim_forever(tg)

    async def _claim_forever(self, tg: TaskGroup) -> None:
        # After a claim that got every run it asked for, more are likely ready: claim straight away and
        # ask ``next_ready`` only when that finds none (a read less per run while a queue drains).
        full = False
        while True:
            free = self.slots - len(self.leases)
            if free <= 0:
                await self._slot_free.wait()
                continue
            self._wake = anyio.Event()
            claims = await self.claim(free) if full else []
            ready_at: float | None = None
            if not claims:
                ready_at = await self.queue.next_ready(
                    self.engine.workflows.names(), limits=self.engine.workflows.limits()
                )
                claims = await self.claim(free) if ready_at is not None and ready_at <= now() else []
            full = len(claims) == free
            for claim in claims:
                lease = Lease(claim.id, claim.token)
                self.leases[lease.run_id] = lease
                tg.start_soon(self._execute, claim, lease)
            if claims:
                self.engine.notify(*(c.id for c in claims))
                continue
            delay = self.poll_s
            if ready_at is not None and ready_at > now():
                delay = min(delay, ready_at - now())
            with anyio.move_on_after(delay):
                await self._wake.wait()

    async def _execute(self, claim: Claim, lease: Lease) -> None:
        """Drive a claimed run in its slot, then the run its last commit claimed for the slot, and so on."""
        try:
            successor: Claim | None = claim
            while successor is not None:
                successor = await self._drive(successor, self.leases[successor.id])
        finally:
            self._slot_free.set()
            self._slot_free = anyio.Event()

    async def _drive(self, claim: Claim, lease: Lease) -> Claim | None:
        """Drive one run; the next run its last commit claimed (its lease held from here), if any."""
        runner: Runner | None = None
        try:
            plan = self.engine.workflows.get(claim.workflow)
            runner = Runner(self.engine, plan, claim, lease, successor=self._successor)
            with self.engine.scope(claim.tenant, claim.project):
                await runner.drive()
        except anyio.get_cancelled_exc_class():
            claimed = runner.next_claims if runner is not None else []
            held = [(lease.run_id, lease.token)] + [(c.id, c.token) for c in claimed]
            with anyio.CancelScope(shield=True):
                await self._release(held)
            raise
        except LeaseLostError:
            log.info("lease on run %s lost (token %s); its worker stopped", lease.run_id, lease.token)
        except CommitUnknownError as exc:
            await self._hand_back(lease, exc)
        except Exception as exc:  # a bug in the runtime: fail the run rather than the whole worker
            log.exception("run %s crashed the runner", lease.run_id)
            await self._crash(claim, lease, exc)
        finally:
            self.leases.pop(lease.run_id, None)
            self.engine.notify(lease.run_id)
            if claim.workflow in self.engine.workflows.limits():  # a slot of its workflow is free: look again
                self._wake_all()
        successor = runner.next_claims[0] if runner is not None and runner.next_claims else None
        if successor is not None:
            self.leases[successor.id] = Lease(successor.id, successor.token)
        return successor

    def _successor(self) -> ClaimOrder | None:
        """What a run's last commit claims for its slot: the next ready run (none once stopping)."""
        if self._stopping:
            return None
        workflows, limits = self.engine.workflows.names(), self.engine.workflows.limits()
        return ClaimOrder(self.owner, self.lease_s, 1, workflows, holder=self.holder, limits=limits)

    async def _crash(self, claim: Claim, lease: Lease, exc: Exception) -> None:
        sets = {**RELEASE, "status": "failed", "error": f"internal error: {type(exc).__name__}: {exc}"}
        events: list[EventSpec] = [("run.state.changed", {"status": "failed", "reason": "internal error"})]
        with anyio.CancelScope(shield=True):
            try:
                store = self.engine.stores(claim.tenant, claim.project)
                await store.commit(StepCommit(lease.run_id, lease.token, sets, events))
            except Exception:
                log.exception("could not record the crash of run %s", lease.run_id)

    async def _hand_back(self, lease: Lease, exc: CommitUnknownError) -> None:
        """The run's last write may or may not have happened: rather than guess, give the run back (once the
        store answers) so that its next claim goes on from what the store holds, at once; fencing decides
        (the release names our token: a run taken over meanwhile, or ended by that very write, is left be)."""
        log.warning("run %s handed back: its last write may or may not have happened (%s)", lease.run_id, exc)
        held = [(lease.run_id, lease.token)]
        await once_reachable(partial(self.queue.release, held), f"worker {self.owner}'s hand-back")
        self._wake_all()

    # -- leases ------------------------------------------------------------------------------
    async def _renew_loop(self) -> None:
        """Renew every ``lease_s / 3``; in between, look for cancels asked by other processes (a cheap read)
        when told of one, and every ``poll_s`` in case a notification was lost.

        While the store cannot be reached, renew is tried again after a short pause instead: the leases
        are renewed as soon as it is back (fencing decides: a run taken over meanwhile is not renewed,
        and its step is stopped here), before the time the lost renewals left them runs out."""
        renew_at = anyio.current_time() + self.lease_s / 3
        outage = Outage(f"worker {self.owner}'s lease renewal")
        while True:
            with anyio.move_on_after(max(0.0, min(self.poll_s, renew_at - anyio.current_time()))):
                await self._cancel_asked.wait()
            self._cancel_asked = anyio.Event()
            held = [(lease.run_id, lease.token) for lease in self.leases.values()]
            try:
                if anyio.current_time() < renew_at:
                    if held:
                        await self._poll_cancels(held)
                    continue
                if held:
                    await self._renew(held)
                renew_at = anyio.current_time() + self.lease_s / 3
                outage.over()
            except StoreUnavailableError as exc:
                renew_at = anyio.current_time()  # renew first once the store answers
                await outage.wait(exc)

    async def _renew(self, held: list[tuple[str, int]]) -> None:
        with anyio.CancelScope(shield=True):
            alive = await self.queue.renew(held, self.lease_s)
        for run_id, token in held:
            lease = self.leases.get(run_id)
            if lease is None or lease.token != token:
                continue
            if run_id not in alive:
                lease.lose()
            elif alive[run_id] and not lease.cancelled:
                lease.cancel(alive[run_id])

    async def _poll_cancels(self, held: list[tuple[str, int]]) -> None:
        asked = await self.queue.cancel_requests([run_id for run_id, _ in held])
        for run_id, reason in asked.items():
            lease = self.leases.get(run_id)
            if lease is not None and not lease.cancelled:
                lease.cancel(reason)

    async def _reap_loop(self) -> None:
        """Take over ended holders' runs and reap, at once on start, then every second or half lease."""
        while True:
            touched = await self.take_over_ended()
            if await self.queue.needs_reaping():
                touched += await self.queue.reap()
            if touched:
                self.engine.notify(*touched)
                self._wake_all()
            await anyio.sleep(min(1.0, self.lease_s / 2))

    def _wake_all(self) -> None:
        """Wake every worker of this runtime (a run became claimable, or a concurrency slot freed)."""
        self.engine.wake_workers()

    async def _release(self, held: list[tuple[str, int]]) -> None:
        """On shutdown, give our leases up so any worker can recover the runs at once."""
        try:
            await self.queue.release(held)
        except Exception:
            log.exception("could not release leases on shutdown")


async def _resilient(loop: Callable[[], Awaitable[None]], name: str) -> None:
    """Keep a worker loop alive through unexpected errors (a full disk, a locked file): log, pause, go on.

    A worker that died silently would leave its runs to lease expiry and its process serving nothing.
    """
    while True:
        try:
            await loop()
            return
        except StoreUnavailableError as exc:  # an outage, not a bug: one line, no traceback
            log.warning("durable worker %s loop: %s; retrying in %.1f s", name, exc, RESTART_S)
        except Exception:
            log.exception("durable worker %s loop failed; retrying in %.1f s", name, RESTART_S)
        await anyio.sleep(RESTART_S)


async def run_worker(
    engine: Engine,
    stop: anyio.Event | None = None,
    *,
    slots: int = 4,
    lease_s: float | None = None,
    drain_s: float = 5.0,
) -> None:
    """Serve the engine's durable runs (``Runtime.engine``) until ``stop`` is set (or the caller is cancelled);
    see ``Worker.run``."""
    await Worker(engine, slots=slots, lease_s=lease_s).run(stop, drain_s=drain_s)
