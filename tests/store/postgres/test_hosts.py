"""Workers on several hosts: ``rath-mcp worker`` processes in three network namespaces (``netns.py``: each
with a veth link, a hostname and a pid namespace of its own, so no worker sees another's processes),
reaching the machine's PostgreSQL through a proxy on their link that delays every chunk each way
(``delay_proxy.py``), as workers on other machines would. Runs are started here, on the machine.

These tests check correctness across hosts, not speed (``bench/scale.py --hosts 3`` measures that):
every run is driven to its end, each step once, by one claim; a host torn down mid-run (its worker
SIGKILLed, its namespace and link removed) has its run taken over by another host once the lease
runs out (``lease.expired``: no worker of another host can see that the process is gone).

Workers poll once an hour (``RATH_POLL_S``), so only notifications carried through the proxy wake
them; every wait is on an event (a barrier arrival, a run's state heard by ``runs.wait``), with a
50-second safety net. They need root and iproute2: under CI (``CI=true``) they fail without them.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import anyio
import pytest
from anyio.abc import Process

from runtime import Runtime
from tests.needs import unavailable
from tests.store.postgres import delay_proxy, netns
from tests.store.postgres.barrier import Barrier
from tests.store.postgres.netns import Host

pytestmark = pytest.mark.anyio
FLOWS = "tests.store.postgres.host_flows"
ROOT = Path(__file__).resolve().parents[3]
WAIT_S = 50  # a safety net on waits for events, never a measure
SHORT_LEASE_S = "2"  # the torn-down host's lease: what its run waits out before another host takes it


@pytest.fixture
def machines() -> Iterator[list[Host]]:
    """Three worker hosts (network namespaces linked to this machine), removed after the test."""
    why = netns.why_not()
    if why is not None:
        unavailable(why, "run as root with iproute2 (ip) and util-linux (unshare), as .ci/run does")
    with ExitStack() as stack:
        try:
            found = stack.enter_context(netns.hosts(3))
        except subprocess.CalledProcessError as exc:
            unavailable(f"network namespaces ({' '.join(exc.cmd)}: {exc.stderr.strip()})", "run as root, as CI does")
        yield found


def through(url: str, listener: delay_proxy.Listener) -> str:
    """``url`` (a test database and schema) reached at the proxy's listener instead of the server."""
    parts = urlsplit(url)
    user = parts.netloc.rpartition("@")[0]
    where = f"{user}@" * bool(user) + f"{listener.host}:{listener.port}"
    return urlunsplit((parts.scheme, where, parts.path, parts.query, ""))


@asynccontextmanager
async def worker(host: Host, url: str, home: Path, *extra: str) -> AsyncIterator[Process]:
    """``rath-mcp worker`` (one slot) on ``host`` for the life of the block; its stderr in ``home``.log."""
    argv = [sys.executable, "-m", "rath_mcp", "worker", "--store", url, "--home", str(home), "--workflows", FLOWS]
    with home.with_name(f"{home.name}.log").open("wb") as err:
        command = host.command([*argv, "--workers", "1", *extra])
        process = await anyio.open_process(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err)
        try:
            yield process
        finally:
            with anyio.CancelScope(shield=True):
                if process.returncode is None:
                    process.kill()  # unshare --kill-child: everything in the host's pid namespace goes too
                await process.wait()


def driven(ledger: Path) -> Counter[tuple[str, str, str]]:
    """How many times each (run, step, visit) ran."""
    lines = ledger.read_text().splitlines() if ledger.exists() else []
    return Counter((run_id, step, visit) for run_id, step, visit, _host in map(str.split, lines))


def hosts_of(ledger: Path) -> dict[str, set[str]]:
    """The hosts each run's steps ran on."""
    out: dict[str, set[str]] = {}
    for line in ledger.read_text().splitlines():
        run_id, _step, _visit, host = line.split()
        out.setdefault(run_id, set()).add(host)
    return out


async def claims(rt: Runtime, run_id: str) -> list[str]:
    """The hosts of the workers that claimed the run, in order (a worker's name starts with its hostname)."""
    events = await rt.runs.events(run_id, limit=1000)
    return [
        str(e.data["worker"]).split(":")[0]
        for e in events
        if e.type == "run.state.changed" and e.data.get("status") == "running"
    ]


async def test_runs_started_here_are_driven_to_their_end_once_each_by_workers_on_three_hosts(
    machines: list[Host], store: str, tmp_path: Path
) -> None:
    ledger, barrier = tmp_path / "ledger", Barrier(tmp_path / "barrier.sock", WAIT_S)
    names = {host.name for host in machines}
    async with (
        delay_proxy.start([(host.outer, 1.0) for host in machines]) as listeners,
        Runtime.open(tmp_path / "here", store=store, workers=0) as rt,
    ):
        rt.workflows.load(FLOWS)
        run_input = {"ledger": str(ledger), "socket": str(barrier.path)}
        held = [(await rt.runs.start("held", input=run_input)).id for _ in machines]
        hops = [(await rt.runs.start("hops", input={"ledger": str(ledger), "steps": 4})).id for _ in range(6)]
        async with anyio.create_task_group() as tg, AsyncExitStack() as workers:
            await tg.start(barrier.serve)
            for i, (host, listener) in enumerate(zip(machines, listeners, strict=True)):
                await workers.enter_async_context(worker(host, through(store, listener), tmp_path / f"w{i}"))
            # one slot each, and a held run keeps its slot until answered: the three are on three hosts
            arrived = [await barrier.next() for _ in held]
            assert sorted(run_id for (run_id, _), _ in arrived) == sorted(held)
            assert {host for (_, host), _ in arrived} == names
            for _, stream in arrived:
                await stream.send(b"go\n")
            for run_id in held + hops:
                done = await rt.runs.wait(run_id, WAIT_S)
                assert done.status == "succeeded", (run_id, done.status, done.error)
            tg.cancel_scope.cancel()

        counts = driven(ledger)
        assert set(counts.values()) == {1}, [key for key, n in counts.items() if n > 1]  # no step driven twice
        per_run = Counter(run_id for run_id, _, _ in counts)
        assert per_run == {**dict.fromkeys(held, 2), **dict.fromkeys(hops, 5)}  # and none left out
        assert sorted((tmp_path / "ledger.paid").read_text().split()) == sorted(held)
        ran_on = hosts_of(ledger)
        for run_id in held + hops:
            (claimed,) = await claims(rt, run_id)  # one claim: the run never changed hands
            assert ran_on[run_id] == {claimed}, (run_id, ran_on[run_id], claimed)
            assert claimed in names


async def test_a_host_torn_down_mid_run_has_its_run_taken_over_by_another_host_when_its_lease_expires(
    machines: list[Host], store: str, tmp_path: Path
) -> None:
    ledger, barrier = tmp_path / "ledger", Barrier(tmp_path / "barrier.sock", WAIT_S)
    lost, *others = machines
    async with (
        delay_proxy.start([(host.outer, 5.0) for host in machines]) as listeners,
        Runtime.open(tmp_path / "here", store=store, workers=0) as rt,
    ):
        rt.workflows.load(FLOWS)
        urls = [through(store, listener) for listener in listeners]
        async with anyio.create_task_group() as tg, AsyncExitStack() as workers:
            await tg.start(barrier.serve)
            # the host to be lost runs alone at first, so the run is its; its lease is short, the others'
            # long (under a loaded machine's stalls a survivor's lease never runs out: no third claim)
            doomed = await workers.enter_async_context(
                worker(lost, urls[0], tmp_path / "w0", "--lease-s", SHORT_LEASE_S)
            )
            run_id = (await rt.runs.start("held", input={"ledger": str(ledger), "socket": str(barrier.path)})).id
            (first_id, first_host), _held = await barrier.next()  # paid, and holding at the barrier
            assert (first_id, first_host) == (run_id, lost.name)
            for i, (host, url) in enumerate(zip(others, urls[1:], strict=True), start=1):
                await workers.enter_async_context(worker(host, url, tmp_path / f"w{i}", "--lease-s", "3600"))

            doomed.send_signal(signal.SIGKILL)  # the host goes away mid-step: its worker, then its network
            await doomed.wait()
            netns.tear_down(lost)

            (again_id, again_host), again = await barrier.next()  # reaped once the lease ran out, claimed elsewhere
            assert again_id == run_id
            assert again_host in {host.name for host in others}
            await again.send(b"go\n")
            done = await rt.runs.wait(run_id, WAIT_S)
            assert done.status == "succeeded", (done.status, done.error)
            tg.cancel_scope.cancel()

        assert await claims(rt, run_id) == [lost.name, again_host]
        kinds = [e.type for e in await rt.runs.events(run_id, limit=1000)]
        assert "lease.expired" in kinds and "lease.taken_over" not in kinds  # by the lease, not by /proc
    assert (tmp_path / "ledger.paid").read_text().split() == [run_id]  # the effect replayed, not paid again
    steps = Counter(step for _, step, _ in driven(ledger).elements())
    assert steps == {"pay": 2, "end": 1}  # the step the host was lost in ran again; the rest once
