"""The same key scenario in memory, over a stdio subprocess, Streamable HTTP and SSE, in both protocol eras.

'legacy' is the initialize handshake (2025-11-25); '2026-07-28' is the handshake-free era. Apart
from the in-memory case (the server object in this process), each case starts a real
``rath-mcp serve`` process (stdio: spawned by the client; HTTP/SSE: on a free port of 127.0.0.1)
with its own home, and drives it with the Python SDK client.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp.client.session import ClientRequestContext
from mcp_types import ElicitRequestParams, ElicitResult

from tests.transports._scenario import call, run_key_scenario
from tests.transports._servers import ERAS, TRANSPORTS, Era, Transport, connected
from tests.transports._updates import Inbox

pytestmark = pytest.mark.anyio

EXPECTED_VERSION = {"legacy": "2025-11-25", "2026-07-28": "2026-07-28"}


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_key_scenario_over_every_transport_and_era(transport: Transport, era: Era, home: Path) -> None:
    inbox = Inbox()
    async with connected(transport, era, home, message_handler=inbox.handle) as client:
        assert client.protocol_version == EXPECTED_VERSION[era]
        await run_key_scenario(client, inbox)


class Human:
    """The person at the client: approves every elicitation form and records what was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def __call__(self, context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        self.asked.append(params.message)
        return ElicitResult(action="accept", content={"decision": "approve", "reason": "fine by me"})


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_interrupt_is_asked_through_the_client_over_every_transport_and_era(
    transport: Transport, era: Era, home: Path
) -> None:
    """A server-to-client question: elicitation (handshake era) or InputRequiredResult (2026-07-28)."""
    human = Human()
    async with connected(transport, era, home, elicitation_callback=human) as client:
        run = await call(
            client, "run_start", {"workflow": "approval", "input": {"draft": "Release notes"}, "wait_s": 20}
        )
        assert run["status"] == "succeeded" and run["pending_interrupts"] == []
        assert len(human.asked) == 1 and "Release notes" in human.asked[0]
        events = (await call(client, "run_events", {"run_id": run["run_id"]}))["events"]
        (decided,) = [e["data"] for e in events if e["type"] == "interrupt.decided"]
        assert decided["action"] == "approve" and decided["actor"].startswith("mcp-elicitation")
