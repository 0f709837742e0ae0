"""A run stays in the trace of the request that started it, whichever process drives it and whenever:
real ``rath-mcp serve`` and ``rath-mcp worker`` processes, exporting to a local OTLP receiver.

The caller's trace context goes in ``_meta`` (SEP-414); the run keeps it in the store, so its drives
are children of the request's span: after the server that started it stopped and another answered
the question it asked, and when a separate worker process on PostgreSQL drives it. Tests wait on
what arrives (the receiver's condition), never on time.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests import pg
from tests.cli.serving import clean_env, rath_argv, running
from tests.otel_receiver import ReceivedSpan, Receiver, receiving, trace_env
from tests.transports._servers import serve_command

pytestmark = pytest.mark.anyio

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"
SECRET = "the launch code is swordfish-4411"
META: Any = {"traceparent": f"00-{TRACE}-{PARENT}-01"}


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    """A receiver, and the environment that sends every process started by the test to it."""
    with receiving() as found:
        for key, value in trace_env(found.url).items():
            monkeypatch.setenv(key, value)
        monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
        yield found


@asynccontextmanager
async def stdio_server(home: Path) -> AsyncIterator[Client]:
    """A ``rath-mcp serve`` over stdio (it stops, flushing its spans, when the block ends)."""
    argv = serve_command("stdio", home)
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))
    async with Client(params, mode="legacy") as connected:
        yield connected


async def spans(receiver: Receiver, name: str, count: int = 1) -> list[ReceivedSpan]:
    return await anyio.to_thread.run_sync(lambda: receiver.wait_for(lambda s: s.name == name, count))


def texts(receiver: Receiver) -> str:
    return repr([(s.name, s.attributes, s.status_message, s.event_attributes) for s in receiver.spans])


async def call(client: Client, tool: str, meta: Any = None, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments, meta=meta)
    assert not result.is_error and isinstance(result.structured_content, dict), result.content
    return result.structured_content


async def test_a_run_answered_after_a_server_restart_keeps_its_trace(home: Path, receiver: Receiver) -> None:
    async with stdio_server(home) as first:
        run = await call(first, "run_start", META, workflow="approval", message=SECRET, wait_s=20)
        assert run["status"] == "waiting" and run["trace_id"] == TRACE, run
    # that server has stopped; another one, later, gets the answer and drives the rest
    async with stdio_server(home) as second:
        asked = run["pending_interrupts"][0]["interrupt_id"]
        await call(second, "interrupt_resolve", interrupt_id=asked, action="approve")
        done = await call(second, "run_wait", run_id=run["run_id"], timeout_s=50)
        assert done["status"] == "succeeded" and done["trace_id"] == TRACE, done
        assert (await call(second, "run_get", run_id=run["run_id"]))["trace_id"] == TRACE

    (request,) = await spans(receiver, "tools/call run_start")
    assert (request.trace_id, request.parent_span_id) == (TRACE, PARENT)
    drives = await spans(receiver, "run approval", 2)
    for drive in drives:  # one by each server, both children of the request that started the run
        assert (drive.trace_id, drive.parent_span_id) == (TRACE, request.span_id), drive
        assert drive.attributes["rath.run_id"] == run["run_id"]
    steps = await spans(receiver, "step publish")
    assert steps[0].trace_id == TRACE and steps[0].parent_span_id in {d.span_id for d in drives}
    (answer,) = await spans(receiver, "tools/call interrupt_resolve")
    assert answer.trace_id != TRACE  # the answering request is a trace of its own; the run stays in its own
    assert "swordfish" not in texts(receiver)


@pytest.fixture
def pg_store(pg_database: str) -> str:
    """A PostgreSQL store URL of a schema of its own, migrated."""
    url = pg.url(pg_database, search_path=anyio.run(pg.create_schema, pg_database))
    done = subprocess.run(rath_argv("migrate", "--store", url), capture_output=True, text=True, env=clean_env())
    assert done.returncode == 0, done.stderr
    return url


async def test_a_run_driven_by_a_separate_worker_process_on_postgresql_is_in_the_same_trace(
    pg_store: str, tmp_path: Path, receiver: Receiver
) -> None:
    serve = rath_argv("serve", "--transport", "http", "--port", "0", "--workers", "0", "--store", pg_store)
    worker = rath_argv("worker", "--workers", "1", "--store", pg_store, "--home", str(tmp_path / "worker"))
    async with (
        running([*serve, "--home", str(tmp_path / "server")]) as server,
        Client(await server.url("/mcp")) as client,
    ):
        run = await call(client, "run_start", META, workflow="echo", message=SECRET)
        assert run["status"] == "queued" and run["trace_id"] == TRACE, run  # nothing in the server drives it
        async with running(worker) as working:
            await working.line_with(r"worker on the store ")
            done = await call(client, "run_wait", run_id=run["run_id"], timeout_s=50)
            assert done["status"] == "succeeded" and done["trace_id"] == TRACE, done

    (request,) = await spans(receiver, "tools/call run_start")
    (drive,) = await spans(receiver, "run echo")
    (echo,) = await spans(receiver, "step echo")
    assert (request.trace_id, request.parent_span_id) == (TRACE, PARENT)
    assert (drive.trace_id, drive.parent_span_id) == (TRACE, request.span_id)
    assert (echo.trace_id, echo.parent_span_id) == (TRACE, drive.span_id)
    assert (echo.attributes["rath.step"], echo.attributes["rath.attempt"], echo.attributes["rath.visit"]) == (
        "echo",
        1,
        1,
    )
    assert "swordfish" not in texts(receiver)
