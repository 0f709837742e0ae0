"""Ids sort by creation: strictly so for the ids one process makes, even within a millisecond."""

from __future__ import annotations

import threading

from runtime.ids import _IdClock, is_id, new_id


def test_ids_made_one_after_another_sort_in_that_order_and_never_repeat() -> None:
    made = [new_id("ses") for _ in range(20_000)]  # many share a millisecond
    assert made == sorted(made) and len(set(made)) == len(made)
    assert all(is_id(i, "ses") for i in made)


def test_within_one_millisecond_and_when_the_clock_steps_back_the_next_id_still_sorts_after() -> None:
    readings = iter([5_000_000, 5_000_000, 5_000_000, 4_000_000, 6_000_000])  # ns: 5 ms three times, 4 ms, 6 ms
    clock = _IdClock(wall_ns=lambda: next(readings))
    stamps = [clock.next() for _ in range(5)]
    assert [ms for ms, _ in stamps] == [5, 5, 5, 5, 6]  # the step back keeps the last millisecond
    assert stamps == sorted(stamps) and len(set(stamps)) == 5


def test_ids_made_on_several_threads_at_once_are_all_different() -> None:
    made: list[list[str]] = [[] for _ in range(4)]
    start = threading.Barrier(4)

    def make(out: list[str]) -> None:
        start.wait()
        out.extend(new_id("evt") for _ in range(5_000))

    threads = [threading.Thread(target=make, args=(out,)) for out in made]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [i for out in made for i in out]
    assert len(set(every)) == len(every)
    assert all(out == sorted(out) for out in made)  # each thread's in its own order
