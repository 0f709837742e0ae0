"""Head-of-line blocking: does one client's largest requests hold up another client's small ones?

One command:  .venv/bin/python -m bench.headofline [--rounds 6] [--pings 300] [--only TOOL,…]

Starts ``rath-mcp serve --transport http`` on 127.0.0.1 with a throwaway home. A pinging client
(this process, the Python SDK over Streamable HTTP) sends ``ping`` requests back to back and times
each round trip. A loading client (a subprocess of its own, speaking JSON-RPC over HTTP with every
body encoded before the load starts, so that it takes next to no CPU from the two sides measured)
sends the largest requests the tools take, one after another, over its own connection:
``session_create`` and ``session_append`` with a message at the limit (200,000 characters),
``memory_remember`` of that much text, ``memory_recall`` with a query at the limit (2,000
characters, many distinct words), ``session_import`` of an export at the limit (1,000,000
characters). Rounds alternate, in the same run: ``--pings`` pings alone, then as many while the
loader keeps sending, so a burst of load from elsewhere on the machine hits both sides alike; a
round alone starts only once the server has finished the work the load left it (its CPU idle), so
that work never lands in the baseline. ``--embedder none`` serves without the local embedding
model, to see what it costs. Prints the p50 and p99 round trip of each side and their ratio; the
target is the p99 with the loader within 2x of the p99 alone. Exits 1 when it is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import anyio
import httpx
from anyio.abc import ByteReceiveStream, ByteSendStream
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning

from rath_mcp.tools.arguments import JSONL_CHARS, QUERY_CHARS, TEXT_CHARS
from tests.transports._servers import http_server

TARGET_RATIO = 2.0
SETTLE_MAX_S = 60.0
TOOLS = ("session_create", "session_append", "memory_remember", "memory_recall", "session_import")
#: Where a request's own digits go in its pre-encoded body: an import's session id and its chunks'
#: uids, a query's first word.
SLOT = b"@" * 16


def words(count: int, width: int) -> str:
    """``count`` distinct words of about ``width`` characters each (BM25 work grows with distinct terms)."""
    return " ".join(f"w{i:0{width - 1}d}" for i in range(count))


def maximal_requests() -> list[tuple[str, dict[str, Any]]]:
    """The loader's cycle of requests, each as large as its tool takes (``session_id`` filled in and
    ``session_import``'s export made when the loader starts)."""
    text = words(TEXT_CHARS // 8, 7)[:TEXT_CHARS]
    query = (SLOT.decode() + " " + words(QUERY_CHARS // 8, 7))[:QUERY_CHARS]  # a query of its own each time
    return [
        ("session_create", {"message": text}),
        ("session_append", {"content": text}),
        ("memory_remember", {"content": text, "scope": "resources"}),
        ("memory_recall", {"query": query, "k": 100}),
        ("session_import", {}),
    ]


class RawClient:
    """The loader's MCP client: JSON-RPC over Streamable HTTP with bodies encoded before the load starts.

    The SDK's client encodes every request with pydantic (a megabyte of JSON per import), CPU the
    loader would take from the two cores the server and the pinging client share; here a request
    during the load is a ``bytes.replace`` at most, and a reply is read to its end but parsed only
    for its outcome."""

    def __init__(self, url: str, http: httpx.AsyncClient) -> None:
        self.url = url
        self.http = http
        self.headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        self.next_id = 0

    async def start(self) -> None:
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "loader", "version": "1"}}
        reply = await self.http.post(self.url, headers=self.headers, content=self._request("initialize", hello))
        reply.raise_for_status()
        self.headers["mcp-session-id"] = reply.headers["mcp-session-id"]
        self.headers["mcp-protocol-version"] = "2025-06-18"
        note = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
        (await self.http.post(self.url, headers=self.headers, content=note)).raise_for_status()

    def _request(self, method: str, params: dict[str, Any]) -> bytes:
        self.next_id += 1
        return json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}).encode()

    @staticmethod
    def encoded(tool: str, arguments: dict[str, Any]) -> bytes:
        """A ``tools/call`` request's params, as the bytes sent (the request id goes around them)."""
        return json.dumps({"name": tool, "arguments": arguments}).encode()

    async def call(self, tool: str, params: bytes) -> dict[str, Any]:
        """Send one pre-encoded ``tools/call``; its structured result, or exit naming the failure."""
        self.next_id += 1
        body = b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}' % (self.next_id, params)
        reply = await self.http.post(self.url, headers=self.headers, content=body)
        text = reply.text
        if reply.headers.get("content-type", "").startswith("text/event-stream"):
            text = next(line[5:] for line in text.splitlines() if line.startswith("data:") and '"id"' in line)
        message = json.loads(text)
        result = message.get("result") or {}
        if reply.status_code != 200 or "error" in message or result.get("isError"):
            raise SystemExit(f"{tool} failed: {text[:500]}")
        structured: dict[str, Any] = result.get("structuredContent") or {}
        return structured


async def import_template(client: RawClient) -> bytes:
    """The params of a ``session_import`` at the limit, encoded, with :data:`SLOT` where each import's
    session id and uids differ: made from a real export (a session of one maximal message) as as many
    copies of its chunk line as fit."""
    text = words(TEXT_CHARS // 8, 7)[:TEXT_CHARS]
    sid = (await client.call("session_create", client.encoded("session_create", {"message": text})))["session_id"]
    export = await client.call("session_export", client.encoded("session_export", {"session_id": sid}))
    header, chunk = (json.loads(line) for line in export["jsonl"].splitlines()[:2])
    slot = SLOT.decode()
    line_chars = len(json.dumps(chunk)) + 1
    count = (JSONL_CHARS - len(json.dumps(header)) - 100) // line_chars
    lines = [json.dumps(header | {"id": f"ses_{0:08x}{slot}", "parents": [], "length": count})]
    lines += [json.dumps(chunk | {"uid": f"{slot}{i:016x}"}) for i in range(count)]
    return client.encoded("session_import", {"jsonl": "\n".join(lines) + "\n"})


async def load(url: str, only: list[str]) -> None:
    """The loading client: on ``go`` from stdin, send maximal requests until ``stop``; acknowledge each."""
    async with httpx.AsyncClient(timeout=httpx.Timeout(600.0)) as http:
        client = RawClient(url, http)
        await client.start()
        sid = (await client.call("session_create", client.encoded("session_create", {"message": "base"})))["session_id"]
        imports = await import_template(client)
        requests = []
        for tool, arguments in maximal_requests():
            if tool in only:
                arguments = {**arguments, "session_id": sid} if tool == "session_append" else arguments
                requests.append((tool, imports if tool == "session_import" else client.encoded(tool, arguments)))
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
                    tool, params = requests[sent % len(requests)]
                    # An import of a session of its own each time (new id and uids), a query never asked
                    # before (a server may keep the vectors of the queries it has embedded).
                    params = params.replace(SLOT, b"%016x" % sent)
                    await client.call(tool, params)
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


async def main(rounds: int, count: int, only: list[str], serve_args: list[str]) -> int:
    warnings.filterwarnings("ignore", "ping is removed", MCPDeprecationWarning)  # the pinger speaks the legacy era
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="rath-bench-") as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        async with http_server("http", home, *serve_args) as server:
            url = f"{server.base}/mcp"
            argv = [sys.executable, "-m", "bench.headofline", "--load", url, "--only", ",".join(only)]
            process = await anyio.open_process(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None)
            loader = Loader(process)
            try:
                if (said := await loader.line()) != "ready":
                    raise SystemExit(f"the loader said {said!r}")
                pinger = Client(url, mode="legacy")
                alone, loaded, sent = await interleaved(pinger, loader, server.process.pid, rounds, count)
            finally:
                await loader.stdin.aclose()
                await process.wait()
    ratio = p99(loaded) / p99(alone)
    print(f"ping round trips over Streamable HTTP: {rounds} rounds of {count} pings alone, then {count} while")
    print(f"another client sent maximal requests ({sent} of them, in turn: {', '.join(only)});")
    print(f"load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after\n")
    print("| pings | p50 ms | p99 ms | x alone (p99) | target |")
    print("|---|---:|---:|---:|---|")
    for name, sample in (("alone", alone), ("beside maximal requests", loaded)):
        r = p99(sample) / p99(alone)
        verdict = "-" if sample is alone else ("ok" if r <= TARGET_RATIO else f"> {TARGET_RATIO}x")
        print(f"| {name} | {statistics.median(sample) * 1000:.3f} | {p99(sample):.3f} | {r:.2f} | {verdict} |")
    return 1 if ratio > TARGET_RATIO else 0


def cpu_seconds(pid: int) -> float:
    """The CPU time a process has used so far, all its threads (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def settled(pid: int) -> None:
    """Return once the server has used under a tenth of a core for a quarter second (at most a minute):
    what the load left behind (embedding remembered items) then no longer runs."""
    with anyio.move_on_after(SETTLE_MAX_S):
        while True:
            before = cpu_seconds(pid)
            await anyio.sleep(0.25)
            if cpu_seconds(pid) - before < 0.025:
                return


async def interleaved(
    client: Client, loader: Loader, server_pid: int, rounds: int, count: int
) -> tuple[list[float], list[float], int]:
    alone: list[float] = []
    loaded: list[float] = []
    sent = 0
    async with client:
        await pings(client, count // 5)  # warm up: connection, first request
        for _ in range(rounds):
            await settled(server_pid)
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
    parser.add_argument("--embedder", help="the server's --embedder (default: the server's own default)")
    parser.add_argument("--load", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.load:
        anyio.run(load, args.load, args.only.split(","))
    else:
        serve_args = ["--embedder", args.embedder] if args.embedder else []
        sys.exit(anyio.run(main, args.rounds, args.pings, args.only.split(","), serve_args))
