"""The same key scenario in memory, over a stdio subprocess, Streamable HTTP and SSE, in both protocol eras.

'legacy' is the initialize handshake (2025-11-25); '2026-07-28' is the handshake-free era. Apart
from the in-memory case (the server object in this process), each case starts a real
``rath-mcp serve`` process (stdio: spawned by the client; HTTP/SSE: on a free port of 127.0.0.1)
with its own home, and drives it with the Python SDK client.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.transports._scenario import run_key_scenario
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
