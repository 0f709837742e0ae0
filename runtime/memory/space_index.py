"""This process's in-memory index of one memory space's vectors, and the int8 form they are kept in.

The store keeps each vector as int8 bytes and a scale (``quantize``); a ``SpaceIndex`` holds a space's
rows of one model as one int8 matrix and scans it with integer SIMD dot products (``simsimd``), then
scores the best again exactly. ``runtime.memory.semantic`` keeps one per space it searches and
refreshes it from the store before each search.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from runtime.extras import require_extra
from runtime.memory.embed import numpy

if TYPE_CHECKING:
    from runtime.memory.embed import Vectors


def quantize(vectors: Vectors) -> list[tuple[float, bytes]]:
    """Each unit vector as (scale, int8 bytes): ``vector ≈ int8 * scale``, one byte per dimension."""
    np = numpy()

    peak = np.maximum(np.abs(vectors).max(axis=1), 1e-12)
    q = np.rint(vectors / peak[:, None] * 127).astype(np.int8)
    return [(float(p / 127), row.tobytes()) for p, row in zip(peak, q, strict=True)]


def _simsimd() -> Any:
    """The SIMD kernels the scan runs on (of the ``embeddings`` extra)."""
    return require_extra("simsimd", "embeddings")


@dataclass
class SpaceIndex:
    """One space's vectors of one model in memory: rows of an int8 matrix, by item ``seq``.

    The rows are the store's own int8 bytes (``quantize``), each with its scale: 100k vectors of
    384 dimensions are 37 MiB, a quarter of float32, and a scan reads a quarter of the memory.
    """

    dim: int = 0
    horizon: int = 0
    size: int = 0
    rows: dict[int, int] = field(default_factory=dict)  # seq -> row
    scopes: dict[str, int] = field(default_factory=dict)  # scope -> its code in ``codes``
    seqs: Any = None  # int64[capacity]
    codes: Any = None  # int16[capacity]: each row's scope
    matrix: Any = None  # int8[capacity, dim]: a row is ``vector / scale``
    scales: Any = None  # float32[capacity]
    lock: anyio.Lock = field(default_factory=anyio.Lock)

    def add(self, found: Sequence[tuple[Any, ...]]) -> None:
        """Rows ``(seq, scope, scale, int8 bytes)``, in place of what the index held for those items."""
        np = numpy()
        if not found:
            return
        if self.matrix is None:
            self.dim = len(bytes(found[0][3]))
            self._grow(max(64, len(found)))
        rows = [r for r in found if len(r[3]) == self.dim]  # another shape under one model id: not comparable
        if not rows:
            return
        blob = b"".join(bytes(r[3]) for r in rows)  # one conversion for the lot: a cold start reads 100k rows
        at = np.empty(len(rows), dtype=np.int64)
        for i, r in enumerate(rows):
            seq = int(r[0])
            row = self.rows.get(seq)
            if row is None:
                row = self.rows[seq] = self.size
                self.size += 1
            at[i] = row
        if self.size > len(self.seqs):
            self._grow(max(2 * len(self.seqs), self.size))  # doubling: appends stay amortized O(1)
        self.seqs[at] = [int(r[0]) for r in rows]
        self.codes[at] = [self.scopes.setdefault(r[1], len(self.scopes)) for r in rows]
        self.scales[at] = [float(r[2]) for r in rows]
        self.matrix[at] = np.frombuffer(blob, dtype=np.int8).reshape(len(rows), self.dim)

    def forget(self, seqs: Sequence[int]) -> None:
        """Items whose vector here is no longer theirs: their rows score 0 (never a hit) until a new
        vector of theirs arrives, which takes a row of its own."""
        for seq in seqs:
            row = self.rows.pop(seq, None)
            if row is not None:
                self.matrix[row] = 0
                self.scales[row] = 0
                self.seqs[row] = 0

    def _grow(self, capacity: int) -> None:
        np = numpy()
        old = self.matrix, self.scales, self.seqs, self.codes
        self.matrix = np.zeros((capacity, self.dim), dtype=np.int8)
        self.scales = np.zeros(capacity, dtype=np.float32)
        self.seqs = np.zeros(capacity, dtype=np.int64)
        self.codes = np.zeros(capacity, dtype=np.int16)
        if old[0] is not None:
            for new, was in zip((self.matrix, self.scales, self.seqs, self.codes), old, strict=True):
                new[: len(was)] = was

    def top(self, query: Vectors, n: int, scope: str | None) -> list[tuple[int, float]]:
        """The ``n`` best ``(seq, cosine)``, best first (of ``scope`` only when it is given).

        Two steps, with the result of one exact scan: the query, rounded to int8 too, is scored
        against every row with integer SIMD dot products (``simsimd``: ~4x less time than a
        float32 matrix product, whose time is reading the matrix), and the best ``POOL(n)`` rows
        are scored again exactly, the int8 row times its scale against the float query. Rounding
        the query moves a cosine by ~5e-4 (its int8 step over the square root of the dimensions),
        far less than the gap between the n-th and the pool's last.
        """
        np = numpy()
        if not self.size or query.shape[0] != self.dim:
            return []
        query = np.asarray(query, dtype=np.float32)
        peak = float(np.abs(query).max()) or 1.0
        q8 = np.rint(query * (127 / peak)).astype(np.int8)
        rough = np.asarray(_simsimd().cdist(q8[None, :], self.matrix[: self.size], metric="dot", out_dtype="float32"))
        rough = rough[0] * self.scales[: self.size]
        if scope is not None:
            code = self.scopes.get(scope)
            if code is None:
                return []
            rough = np.where(self.codes[: self.size] == code, rough, -np.inf)
        pool = min(self.size, 8 * n + 64)
        rows = np.argpartition(-rough, pool - 1)[:pool] if pool < self.size else np.arange(self.size)
        rows = rows[np.isfinite(rough[rows])]
        exact = (self.matrix[rows].astype(np.float32) * self.scales[rows, None]) @ query
        order = np.argsort(-exact, kind="stable")[:n]
        return [(int(self.seqs[rows[i]]), float(exact[i])) for i in order]
