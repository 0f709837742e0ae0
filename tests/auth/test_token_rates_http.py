"""``token create --rate R/s --burst N`` against two ``rath-mcp serve --auth token`` processes on one store.

The count is the store's: calls to either server take from the same burst, so a token that one server
alone would still let in is refused once the two together have used it up. Over the limit a call gets
HTTP 429 with ``Retry-After``, and its body is a JSON-RPC error naming the limit, which the MCP Python
SDK client raises as the call's ``MCPError``. The rate (1/h) is slow enough that nothing refills while
the test runs: what is let in is the burst, whatever the test's speed.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from rath_mcp.auth.gate import RATE_LIMITED
from runtime.store import StoreURL
from tests.cli.serving import clean_env, rath_argv, running
from tests.store.contracts.conftest import fresh_store_url

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> StoreURL:
    url = fresh_store_url(request.param, tmp_path, request)
    done = subprocess.run(rath_argv("migrate", "--store", url.url), env=clean_env(), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return url


async def token(url: StoreURL, *limit: str) -> str:
    argv = rath_argv("token", "create", "--tenant", "local", "--project", "default", "--grants", "admin", *limit)
    done = await anyio.run_process([*argv, "--store", url.url], env=clean_env(), check=False)
    assert done.returncode == 0, done.stderr.decode()
    out = done.stdout.decode().strip().splitlines()
    assert any(line.startswith("rate limit 1/h, burst") for line in out), out
    return out[-1]


def serve(url: StoreURL) -> list[str]:
    return rath_argv(
        "serve", "--transport", "http", "--port", "0", "--auth", "token", "--workers", "0", "--store", url.url
    )


async def test_the_burst_is_shared_by_two_server_processes_and_then_429(store_url: StoreURL) -> None:
    secret = await token(store_url, "--rate", "1/h", "--burst", "6")
    headers = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}
    async with running(serve(store_url)) as a, running(serve(store_url)) as b, httpx2.AsyncClient() as http:
        urls = [await a.url("/mcp"), await b.url("/mcp")]
        for i in range(6):  # three calls to each server: the burst of six, together
            answer = await http.post(urls[i % 2], content=b"{}", headers=headers)
            assert answer.status_code != 429, (i, answer.text)
        for where in urls:  # either server would have let three more in on a count of its own
            answer = await http.post(where, content=b"{}", headers=headers)
            assert answer.status_code == 429, answer.text
            assert 3000 <= int(answer.headers["retry-after"]) <= 3600  # one call's worth of 1/h
            error = answer.json()["error"]
            assert error["code"] == RATE_LIMITED and "over its rate limit of 1/h, burst 6" in error["message"]
        other = await token(store_url, "--rate", "1/h", "--burst", "2")  # each token has a count of its own
        answer = await http.post(urls[0], content=b"{}", headers={**headers, "Authorization": f"Bearer {other}"})
        assert answer.status_code != 429


async def test_an_mcp_client_gets_an_error_naming_the_limit(store_url: StoreURL) -> None:
    secret = await token(store_url, "--rate", "1/h", "--burst", "5")
    async with running(serve(store_url)) as a, running(serve(store_url)) as b:
        urls = [await a.url("/mcp"), await b.url("/mcp")]
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"}) as http,
            Client(streamable_http_client(urls[0], http_client=http)) as first,
        ):
            made = await first.call_tool("session_create", {"message": "hello"})  # initialize, initialized, this
            assert not made.is_error, made
        with pytest.raises(BaseException) as caught:  # B's own session would fit in a burst of five
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"}) as http,
                Client(streamable_http_client(urls[1], http_client=http)) as second,
            ):
                for _ in range(5):
                    await second.call_tool("session_create", {"message": "hello"})
    error = caught.value
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    assert isinstance(error, MCPError), repr(error)
    assert "over its rate limit of 1/h, burst 5" in str(error), str(error)
