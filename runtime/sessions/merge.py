"""Merge semantics as pure functions, so every store implementation merges the same way.

A merge of branches ``[b0, b1, …]`` is folded left to right: ``b0`` is taken whole (its chunks are
shared, not copied), then each later branch adds only what the result does not hold yet.

- Chunks: the prefix every branch shares (by chunk identity, ``uid``) appears once; after ``b0``,
  each branch contributes its chunks past that prefix that no earlier branch already holds, in
  argument order. Two branches that share more with each other than with the rest (``a`` and
  ``b`` both forked after ``X``, ``c`` before it) therefore still carry ``X`` once.
- Usage: every session records its *own* usage, what it added over its parents (append: the
  added usage; fork: nothing; a root, detach included: all of it). A session's usage is the sum of
  the own usage of its ancestors and itself, so a merge's usage is that sum over the *union* of
  the branches' ancestries. For two branches with common ancestor ``c`` this is exactly ``c``'s
  usage plus each branch's delta over ``c``; with no common ancestor it is the plain sum; and
  shared history is never counted twice, however the branches criss-cross.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from runtime.sessions.model import Usage
from runtime.sessions.store import BranchTails


def shared_prefix(branches: Sequence[Sequence[str]]) -> int:
    """Length of the longest prefix every branch shares, by chunk identity."""
    for i, column in enumerate(zip(*branches, strict=False)):
        if column.count(column[0]) != len(column):
            return i
    return min(len(b) for b in branches)


def merged_tail(branches: Sequence[Sequence[str]]) -> tuple[int, list[tuple[int, int]]]:
    """From each branch's chunk uids: the shared prefix length, and ``(branch, position)`` of each
    chunk to put after the first branch, in order (``merged_tail_of`` over whole branches)."""
    first = set(branches[0])
    later = {uid for branch in branches[1:] for uid in branch}
    return merged_tail_of(BranchTails(0, tuple(tuple(b) for b in branches), frozenset(later & first)))


def merged_tail_of(view: BranchTails) -> tuple[int, list[tuple[int, int]]]:
    """The shared prefix length, and ``(branch, position)`` of each chunk to put after the first
    branch, in order, from what the branches hold past their structurally shared start.

    A chunk is skipped when an *earlier* branch already holds it; repeats inside one branch
    (possible after a ``concat`` merge) are kept, since they are that branch's own content. Only
    the later branches' tail uids are ever asked about, so knowing which of them the first branch
    holds (``view.in_first``) is knowing all of it that matters.
    """
    start, tails = view.start, view.tails
    prefix = start + shared_prefix(tails)
    held = set(view.in_first)
    picks: list[tuple[int, int]] = []
    for k, tail in enumerate(tails[1:], start=1):
        own = [i for i in range(prefix, start + len(tail)) if tail[i - start] not in held]
        picks.extend((k, i) for i in own)
        held.update(tail[i - start] for i in own)
    return prefix, picks


def total_usage(own_usages: Iterable[Usage]) -> Usage:
    """The usage of a history: the sum of its sessions' own usage (each session once)."""
    return sum(own_usages, Usage())
