"""A process that submits runs through the MCP server with idempotency keys, for the racing tests.

    python -m tests.mcp.submit_proc STORE_URL HOME GO_FILE KEY...

Opens the store (no workers), prints "ready", waits for GO_FILE (made by the test once every
process is ready, so their submits overlap), then for each KEY calls ``run_start`` with the same
message and key through an in-memory MCP client, and prints ``{key: run_id}`` as one JSON line.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
from mcp import Client

from rath_mcp.server import build_server
from runtime import Runtime


async def submit(store: str, home: str, go: str, keys: list[str]) -> None:
    async with Runtime.open(home, store=store, workers=0) as rt, Client(build_server(rt)) as client:
        print("ready", flush=True)
        while not Path(go).exists():  # noqa: ASYNC110, ASYNC240 - the test process creates it
            await anyio.sleep(0.002)
        made: dict[str, str] = {}
        for key in keys:
            args = {"workflow": "echo", "message": f"retry me {key}", "idempotency_key": key}
            result = await client.call_tool("run_start", args)
            assert not result.is_error and result.structured_content is not None, result.content
            made[key] = result.structured_content["run_id"]
        print(json.dumps(made), flush=True)


if __name__ == "__main__":
    store_url, home_dir, go_file, *key_list = sys.argv[1:]
    anyio.run(submit, store_url, home_dir, go_file, key_list)
