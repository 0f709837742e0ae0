"""Round-trip latency of rath-mcp tools over stdio, next to a no-op tool on a bare ``MCPServer``.

One command:  .venv/bin/python -m bench.mcp [--calls 300] [--chunks 20]

Both servers run as real stdio subprocesses in the same run, driven by the same Python SDK client
(handshake era), so the baseline holds everything the SDK and the pipe cost; what is left over is
our own cost per call. ``session_get`` reads a session of ``--chunks`` chunks (a page of 50);
``session_fork`` writes a committed snapshot to SQLite (synchronous=FULL, one fsync per group
commit). Prints a table of medians and p90s with the ratio to the no-op's median; the target is
``session_get`` and ``session_fork`` within 1.5x of the no-op.
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


async def timed(name: str, calls: int, warmup: int, once: Callable[[], Awaitable[Any]]) -> Sample:
    """Median-ready samples of ``calls`` sequential round trips after ``warmup`` untimed ones."""
    for _ in range(warmup):
        await once()
    seconds = []
    for _ in range(calls):
        start = time.perf_counter()
        await once()
        seconds.append(time.perf_counter() - start)
    return Sample(name, seconds)


async def checked(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        raise SystemExit(f"{tool} failed: {result.content}")
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def measure_noop(calls: int, warmup: int) -> Sample:
    params = StdioServerParameters(command=sys.executable, args=["-m", "bench.mcp", "--bare-server"])
    async with Client(params, mode="legacy") as client:
        return await timed("noop (bare MCPServer)", calls, warmup, lambda: checked(client, "noop", {"session_id": "x"}))


async def measure_rath(home: Path, calls: int, warmup: int, chunks: int) -> list[Sample]:
    argv = ["-m", "rath_mcp", "serve", "--transport", "stdio", "--home", str(home)]
    async with Client(StdioServerParameters(command=sys.executable, args=argv), mode="legacy") as client:
        root = await checked(client, "session_create", {"message": "benchmark"})
        sid = root["session_id"]
        for i in range(chunks - 1):
            sid = (await checked(client, "session_append", {"session_id": sid, "content": f"chunk {i} " * 20}))[
                "session_id"
            ]
        get = await timed("session_get", calls, warmup, lambda: checked(client, "session_get", {"session_id": sid}))
        fork = await timed("session_fork", calls, warmup, lambda: checked(client, "session_fork", {"session_id": sid}))
        return [get, fork]


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
        baseline = await measure_noop(calls, warmup)
        samples = await measure_rath(Path(tmp) / "home", calls, warmup, chunks)
    print(f"stdio round trips, {calls} calls each after {warmup} warm-up, session of {chunks} chunks\n")
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
