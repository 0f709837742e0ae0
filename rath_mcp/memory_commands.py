"""``rath-mcp memory reindex``: embed the memory items no vector of the configured model holds yet.

Items stored before an embedder was configured, or embedded by another model, have no usable vector;
a server embeds them in the background, this command does it now, in the foreground, and says how
many items are embedded when it is done (CONTRACT §13).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from rath_mcp.shell import existing_store, note
from runtime import Runtime, UsageError, resolve_home
from runtime.memory.embed import make_embedder, resolve_spec
from runtime.memory.semantic import Semantic

HomeArg = Any


def add_commands(sub: Any, home_arg: HomeArg) -> None:
    """Register ``memory reindex`` on the top-level subparsers."""
    memory = sub.add_parser("memory", help="memory maintenance").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    p = memory.add_parser("reindex", help="embed the items the embedder has not embedded yet")
    p.add_argument(
        "--embedder",
        metavar="local|openai[:MODEL]",
        help="the model to embed with (default: config.json memory.embedder, else local when installed)",
    )
    home_arg(p)


async def run(args: argparse.Namespace) -> int:
    home = resolve_home(args.home)
    spec = resolve_spec(args.embedder, home)
    embedder = make_embedder(spec)
    if embedder is None:
        raise UsageError("memory reindex needs an embedder: --embedder local (extra rath-mcp[embeddings]) or openai")
    # No workers, no background embedding task: this process embeds in the foreground, then stops.
    async with Runtime.open(home, store=existing_store(home, args.store), workers=0, create=False) as rt:
        vectors = rt.memory.store.vectors()
        before = await vectors.count(embedder.model)
        stored = await Semantic(embedder).embed_pending(vectors)
        total, done = await vectors.count(embedder.model)
    note(f"embedded {stored} item(s) with {embedder.model}; {done} of {total} item(s) now embedded (was {before[1]})")
    print(json.dumps({"model": embedder.model, "embedded": stored, "items": total, "with_vectors": done}))
    return 0
