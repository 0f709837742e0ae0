"""A query's embedding with the local model runs below the event loop's CPU priority, with its OpenMP
threads: seconds of CPU on every core for a maximal query must not take the cores from other requests
(bench/headofline.py measures the effect; this checks the cause stays removed).

The check counts the threads a query makes, so it runs in a process of its own: in the test process,
threads other tests left behind (a runtime's background embedder, anyio's workers) may start meanwhile.
"""

from __future__ import annotations

import json
import subprocess
import sys

from runtime.memory.embed import QUERY_NICE, local_available
from tests.needs import unavailable

CENSUS = r"""
import json, os, threading
from pathlib import Path
from runtime.memory.embed import LocalEmbedder

def nice_of_threads():
    found = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:  # a thread that ended meanwhile
            continue
        found[int(task.name)] = int(fields[16])  # field 19 of stat: the nice value
    return found

embedder = LocalEmbedder()
before = set(nice_of_threads())
seen = []

def query():
    embedder.query(" ".join(f"word{i}" for i in range(300)))  # long enough for OpenMP to fork its team
    seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
    before.add(threading.get_native_id())  # not one the query made (it may outlive join() a moment)

caller = threading.Thread(target=query)
caller.start()
caller.join()
made = {tid: nice for tid, nice in nice_of_threads().items() if tid not in before}
print(json.dumps({"caller": seen, "made": sorted(made.values())}))
"""


def test_a_query_is_embedded_below_the_event_loops_priority() -> None:
    if not local_available():
        unavailable("the embeddings extra", "pip install -e '.[embeddings]'")
    done = subprocess.run([sys.executable, "-c", CENSUS], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["caller"] == [0]  # the caller (a worker thread of the event loop's process) keeps its priority
    assert found["made"] and set(found["made"]) == {QUERY_NICE}, found  # the query's thread and OpenMP's team
