"""A token's rate limit, counted in the store (``TokenService.take``), on SQLite and PostgreSQL.

Two backend objects on one store stand in for two servers: they share the count. The clock is
injected: a token at 2/s with a burst of 3 lets 3 calls in at once, then one every half second.
"""

from __future__ import annotations

import anyio
import pytest

from runtime.access import TokenService
from runtime.backend import StoreBackend
from runtime.errors import InvalidInputError
from tests.store.contracts.conftest import open_again

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.t = 1_000_000.0

    def __call__(self) -> float:
        return self.t


async def test_a_rate_limit_is_shared_by_every_server_on_the_store(backend: StoreBackend) -> None:
    clock = Clock()
    here = TokenService(backend.tokens(), ["run.read"], clock=clock)
    record, _ = await here.create("t", "p", ["run.read"], rate=2.0, burst=3)
    other = await open_again(backend)
    try:
        there = TokenService(other.tokens(), ["run.read"], clock=clock)
        record = await there.store.get(record.id) or record  # read back: what a server authenticates
        assert (record.rate, record.burst) == (2.0, 3)
        waits = [await (here if i % 2 else there).take(record) for i in range(4)]
        assert waits[:3] == [0.0, 0.0, 0.0] and waits[3] == pytest.approx(0.5)  # the burst, then 2/s
        clock.t += 0.5
        assert await there.take(record) == 0.0  # half a second later: one more
        assert await here.take(record) == pytest.approx(0.5)  # a refused call was not counted
        clock.t += 10.0
        assert [await here.take(record) for _ in range(4)][:3] == [0.0, 0.0, 0.0]  # idle: the burst again
    finally:
        await other.close()


async def test_racing_servers_never_let_more_than_the_burst_in(backend: StoreBackend) -> None:
    clock = Clock()
    tokens = TokenService(backend.tokens(), ["run.read"], clock=clock)
    record, _ = await tokens.create("t", "p", ["run.read"], rate=1.0, burst=5)
    others = [await open_again(backend), await open_again(backend)]
    let_in: list[float] = []

    async def call(service: TokenService) -> None:
        if await service.take(record) == 0.0:
            let_in.append(clock.t)

    try:
        async with anyio.create_task_group() as tg:
            for i in range(30):
                each = [backend, *others][i % 3]
                tg.start_soon(call, TokenService(each.tokens(), ["run.read"], clock=clock))
    finally:
        for other in others:
            await other.close()
    assert len(let_in) == 5


async def test_a_token_without_a_rate_is_never_counted_and_bad_limits_are_refused(backend: StoreBackend) -> None:
    tokens = TokenService(backend.tokens(), ["run.read"], clock=Clock())
    record, _ = await tokens.create("t", "p", ["run.read"])
    assert record.rate is None and [await tokens.take(record) for _ in range(100)] == [0.0] * 100
    with pytest.raises(InvalidInputError, match="--burst limits nothing without --rate"):
        await tokens.create("t", "p", ["run.read"], burst=3)
    with pytest.raises(InvalidInputError, match="--burst 0 must be a whole number"):
        await tokens.create("t", "p", ["run.read"], rate=1.0, burst=0)
    defaulted, _ = await tokens.create("t", "p", ["run.read"], rate=2.5)
    assert defaulted.burst == 3  # one second's worth, rounded up
