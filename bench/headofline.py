"""Head-of-line blocking: does one client's largest requests hold up another client's small ones?

One command:  .venv/bin/python -m bench.headofline [--rounds 6] [--pings 300] [--only TOOL,…]

Starts ``rath-mcp serve --transport http`` on 127.0.0.1 with a throwaway home. A pinging client
(this process, the Python SDK over Streamable HTTP) sends ``ping`` requests back to back and times
each round trip. A loading client (a subprocess of its own, so its JSON encoding never shares this
process's CPU or event loop) sends the largest requests the tools take, one after another, over
its own connection: ``session_create`` and ``session_append`` with a message at the limit
(200,000 characters), ``memory_remember`` of that much text, ``memory_recall`` with a query at
the limit (2,000 characters, many distinct words), ``session_import`` of an export at the limit
(1,000,000 characters). Rounds alternate, in the same run: ``--pings`` pings alone, then as many
while the loader keeps sending, so a burst of load from elsewhere on the machine hits both sides
alike. Prints the p50 and p99 round trip of each side and their ratio; the target is the p99 with
the loader within 2x of the p99 alone. Exits 1 when it is missed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning

from rath_mcp.tools.arguments import JSONL_CHARS, QUERY_CHARS, TEXT_CHARS
from tests.transports._servers import http_server

TARGET_RATIO = 2.0
TOOLS = ("session_create", "session_append", "memory_remember", "memory_recall", "session_import")


def words(count: int, width: int) -> str:
    """``count`` distinct words of about ``width`` characters each (BM25 work grows with distinct terms)."""
    return " ".join(f"w{i:0{width - 1}d}" for i in range(count))


def maximal_requests() -> list[tuple[str, dict[str, Any]]]:
    """The loader's cycle of requests, each as large as its tool takes (``session_id`` and ``jsonl`` filled in
    as they are sent)."""
    text = words(TEXT_CHARS // 8, 7)[:TEXT_CHARS]
    query = words(QUERY_CHARS // 8, 7)[:QUERY_CHARS]
    return [
        ("session_create", {"message": text}),
        ("session_append", {"content": text}),
        ("memory_remember", {"content": text, "scope": "resources"}),
        ("memory_recall", {"query": query, "k": 100}),
        ("session_import", {}),
    ]


async def checked(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        text = " ".join(getattr(b, "text", "") for b in result.content)
        raise SystemExit(f"{tool} failed: {text[:500]}")
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def import_template(client: Client) -> tuple[dict[str, Any], dict[str, Any]]:
    """A real export's header and chunk line (a session of one maximal message), to build imports from."""
    text = words(TEXT_CHARS // 8, 7)[:TEXT_CHARS]
    sid = (await checked(client, "session_create", {"message": text}))["session_id"]
    header, chunk = (await checked(client, "session_export", {"session_id": sid}))["jsonl"].splitlines()[:2]
    return json.loads(header), json.loads(chunk)


def largest_import(template: tuple[dict[str, Any], dict[str, Any]], n: int) -> str:
    """An export at the import limit, under a session id of its own (so each import writes a new session).

    Made from a real export's lines: as many copies of its chunk as fit (each with a fresh ``uid``)."""
    header, chunk = template
    line_chars = len(json.dumps(chunk)) + 1
    count = (JSONL_CHARS - len(json.dumps(header)) - 100) // line_chars
    lines = [json.dumps(header | {"id": f"ses_{n:024x}", "parents": [], "length": count})]
    lines += [json.dumps(chunk | {"uid": uuid.uuid4().hex}) for _ in range(count)]
    return "\n".join(lines) + "\n"


async def load(url: str, only: list[str]) -> None:
    """The loading client: on ``go`` from stdin, send maximal requests until ``stop``; acknowledge each."""
    async with Client(url, mode="legacy") as client:
        template = await import_template(client)
        requests = [(tool, arguments) for tool, arguments in maximal_requests() if tool in only]
        sid = (await checked(client, "session_create", {"message": "base"}))["session_id"]
        sent = 0
        print("ready", flush=True)
        for line in sys.stdin:
            if line.strip() != "go":
                return
            stop = anyio.Event()
            async with anyio.create_task_group() as tg:
                tg.start_soon(stopped_by_stdin, stop)
                print("going", flush=True)
                while not stop.is_set():
                    tool, arguments = requests[sent % len(requests)]
                    if tool == "session_append":
                        arguments = {**arguments, "session_id": sid}
                    if tool == "session_import":
                        arguments = {"jsonl": largest_import(template, sent)}
                    await checked(client, tool, arguments)
                    sent += 1
            print(f"stopped {sent}", flush=True)


async def stopped_by_stdin(stop: anyio.Event) -> None:
    """Set ``stop`` when the next line arrives on stdin."""
    await anyio.to_thread.run_sync(sys.stdin.readline)
    stop.set()


class Loader:
    """The loading subprocess, driven by lines on its stdin."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        assert process.stdin is not None and process.stdout is not None
        self.stdin: ByteSendStream = process.stdin
        self.stdout: ByteReceiveStream = process.stdout
        self.buffer = b""

    async def line(self) -> str:
        while b"\n" not in self.buffer:
            chunk = await self.stdout.receive()
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode()

    async def say(self, word: str) -> str:
        await self.stdin.send(word.encode() + b"\n")
        return await self.line()


async def pings(client: Client, count: int) -> list[float]:
    seconds = []
    for _ in range(count):
        start = time.perf_counter()
        await client.send_ping()
        seconds.append(time.perf_counter() - start)
    return seconds


def p99(seconds: list[float]) -> float:
    return statistics.quantiles(seconds, n=100)[-1] * 1000


async def main(rounds: int, count: int, only: list[str]) -> int:
    warnings.filterwarnings("ignore", "ping is removed", MCPDeprecationWarning)  # the pinger speaks the legacy era
    with tempfile.TemporaryDirectory(prefix="rath-bench-") as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        async with http_server("http", home) as server:
            url = f"{server.base}/mcp"
            argv = [sys.executable, "-m", "bench.headofline", "--load", url, "--only", ",".join(only)]
            process = await anyio.open_process(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None)
            loader = Loader(process)
            try:
                if (said := await loader.line()) != "ready":
                    raise SystemExit(f"the loader said {said!r}")
                alone, loaded, sent = await interleaved(Client(url, mode="legacy"), loader, rounds, count)
            finally:
                await loader.stdin.aclose()
                await process.wait()
    ratio = p99(loaded) / p99(alone)
    print(f"ping round trips over Streamable HTTP: {rounds} rounds of {count} pings alone, then {count} while")
    print(f"another client sent maximal requests ({sent} of them, in turn: {', '.join(only)})\n")
    print("| pings | p50 ms | p99 ms | x alone (p99) | target |")
    print("|---|---:|---:|---:|---|")
    for name, sample in (("alone", alone), ("beside maximal requests", loaded)):
        r = p99(sample) / p99(alone)
        verdict = "-" if sample is alone else ("ok" if r <= TARGET_RATIO else f"> {TARGET_RATIO}x")
        print(f"| {name} | {statistics.median(sample) * 1000:.3f} | {p99(sample):.3f} | {r:.2f} | {verdict} |")
    return 1 if ratio > TARGET_RATIO else 0


async def interleaved(client: Client, loader: Loader, rounds: int, count: int) -> tuple[list[float], list[float], int]:
    alone: list[float] = []
    loaded: list[float] = []
    sent = 0
    async with client:
        await pings(client, count // 5)  # warm up: connection, first request
        for _ in range(rounds):
            alone += await pings(client, count)
            if (said := await loader.say("go")) != "going":
                raise SystemExit(f"the loader said {said!r}")
            loaded += await pings(client, count)
            sent = int((await loader.say("stop")).split()[1])
    return alone, loaded, sent


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6, help="rounds of pings alone, then beside the load (default 6)")
    parser.add_argument("--pings", type=int, default=300, help="pings per side per round (default 300)")
    parser.add_argument("--only", default=",".join(TOOLS), help="the tools the loader calls, in turn (default: all)")
    parser.add_argument("--load", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.load:
        anyio.run(load, args.load, args.only.split(","))
    else:
        sys.exit(anyio.run(main, args.rounds, args.pings, args.only.split(",")))
