"""A query's embedding with the local model runs below the event loop's CPU priority, with its OpenMP
threads: seconds of CPU on every core for a maximal query must not take the cores from other requests
(bench/headofline.py measures the effect; this checks the cause stays removed)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from runtime.memory.embed import QUERY_NICE, LocalEmbedder, local_available
from tests.needs import unavailable


def _nice_of_threads() -> dict[int, int]:
    """Each thread of this process: its nice value (field 19 of /proc/self/task/TID/stat)."""
    found = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:  # a thread that ended meanwhile
            continue
        found[int(task.name)] = int(fields[16])
    return found


def test_a_query_is_embedded_below_the_event_loops_priority() -> None:
    if not local_available():
        unavailable("the embeddings extra", "pip install -e '.[embeddings]'")
    embedder = LocalEmbedder()
    before = set(_nice_of_threads())
    seen: list[int] = []

    def query() -> None:
        embedder.query(" ".join(f"word{i}" for i in range(300)))  # long enough for OpenMP to fork its team
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        before.add(threading.get_native_id())  # not one the query made (it may outlive join() a moment)

    caller = threading.Thread(target=query)
    caller.start()
    caller.join()
    assert seen == [0]  # the caller (a worker thread of the event loop's process) keeps its priority
    made = {tid: nice for tid, nice in _nice_of_threads().items() if tid not in before}
    assert made and set(made.values()) == {QUERY_NICE}, made  # the query's thread and OpenMP's team
