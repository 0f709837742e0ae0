"""Round-trip latency of rath-mcp tools over stdio, next to a no-op tool on a bare ``MCPServer``.

One command:  .venv/bin/python -m bench.mcp [--calls 300] [--chunks 20]

Both servers run as real stdio subprocesses, open side by side and driven by the same Python SDK
client (handshake era) in alternating blocks of back-to-back calls, so the baseline holds
everything the SDK and the pipe cost (including the client's check of each result against the
tool's outputSchema); what is left over is our own cost per call. ``session_get`` reads a
session of ``--chunks`` chunks (a page of 50); ``session_fork`` writes a committed snapshot to
SQLite (synchronous=FULL, one fsync per group commit). Prints a table of medians and p90s with the
ratio to the no-op's median; the target is ``session_get`` and ``session_fork`` within 1.5x of
the no-op. Exits 1 when a tool misses it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

TARGET_RATIO = 1.5


@dataclass
class Sample:
    name: str
    seconds: list[float]

    @property
    def median_ms(self) -> float:
        return statistics.median(self.seconds) * 1000

    @property
    def p90_ms(self) -> float:
        return statistics.quantiles(self.seconds, n=10)[-1] * 1000


def bare_server() -> None:
    """The baseline: an ``MCPServer`` with one tool that does nothing, served over stdio."""
    from mcp.server import MCPServer

    server = MCPServer("bare", version="0")

    @server.tool()
    def noop(session_id: str) -> dict[str, str]:
        """Return the argument unchanged."""
        return {"session_id": session_id}

    server.run()


BLOCK = 50


async def timed_blocks(calls: int, warmup: int, probes: dict[str, Callable[[], Awaitable[Any]]]) -> list[Sample]:
    """``calls`` timed calls per probe, in blocks of ``BLOCK`` back-to-back calls, the probes taking turns.

    Back-to-back calls measure each server warm (as a host calling it repeatedly sees it); taking
    turns block by block means a burst of load from elsewhere on the machine hits all probes alike
    instead of skewing whichever happened to run during it. Each probe first gets ``warmup`` untimed calls.
    """
    samples = {name: Sample(name, []) for name in probes}
    for once in probes.values():
        for _ in range(warmup):
            await once()
    for start_at in range(0, calls, BLOCK):
        for name, once in probes.items():
            for _ in range(min(BLOCK, calls - start_at)):
                start = time.perf_counter()
                await once()
                samples[name].seconds.append(time.perf_counter() - start)
    return list(samples.values())


async def checked(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        raise SystemExit(f"{tool} failed: {result.content}")
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def seed_session(client: Client, chunks: int) -> str:
    """A session of ``chunks`` chunks of about 160 characters each; returns its id."""
    sid = str((await checked(client, "session_create", {"message": "benchmark"}))["session_id"])
    for i in range(chunks - 1):
        sid = str(
            (await checked(client, "session_append", {"session_id": sid, "content": f"chunk {i} " * 20}))["session_id"]
        )
    return sid


async def measure(home: Path, calls: int, warmup: int, chunks: int) -> list[Sample]:
    """Both servers as stdio subprocesses, open side by side, probed in alternating blocks."""
    bare = StdioServerParameters(command=sys.executable, args=["-m", "bench.mcp", "--bare-server"])
    argv = ["-m", "rath_mcp", "serve", "--transport", "stdio", "--home", str(home)]
    rath = StdioServerParameters(command=sys.executable, args=argv)
    async with Client(bare, mode="legacy") as noop, Client(rath, mode="legacy") as client:
        sid = await seed_session(client, chunks)
        probes: dict[str, Callable[[], Awaitable[Any]]] = {
            "noop (bare MCPServer)": lambda: checked(noop, "noop", {"session_id": sid}),
            "session_get": lambda: checked(client, "session_get", {"session_id": sid}),
            "session_fork": lambda: checked(client, "session_fork", {"session_id": sid}),
        }
        return await timed_blocks(calls, warmup, probes)


def table(baseline: Sample, samples: list[Sample]) -> str:
    rows = [f"| {'call':<22} | median ms | p90 ms | x no-op | target |", "|---|---:|---:|---:|---|"]
    for s in [baseline, *samples]:
        ratio = s.median_ms / baseline.median_ms
        verdict = "-" if s is baseline else ("ok" if ratio <= TARGET_RATIO else f"> {TARGET_RATIO}x")
        rows.append(f"| {s.name:<22} | {s.median_ms:9.3f} | {s.p90_ms:6.3f} | {ratio:7.2f} | {verdict} |")
    return "\n".join(rows)


async def main(calls: int, chunks: int) -> int:
    warmup = max(10, calls // 10)
    with tempfile.TemporaryDirectory(prefix="rath-bench-") as tmp:
        baseline, *samples = await measure(Path(tmp) / "home", calls, warmup, chunks)
    print(f"stdio round trips: {calls} calls per tool in blocks of {BLOCK} taking turns, after {warmup} warm-up;")
    print(f"session_get reads a session of {chunks} chunks\n")
    print(table(baseline, samples))
    slow = [s.name for s in samples if s.median_ms / baseline.median_ms > TARGET_RATIO]
    return 1 if slow else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="timed calls per tool (default 300)")
    parser.add_argument("--chunks", type=int, default=20, help="chunks in the session read by session_get")
    parser.add_argument("--bare-server", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare_server:
        bare_server()
    else:
        sys.exit(anyio.run(main, args.calls, args.chunks))
