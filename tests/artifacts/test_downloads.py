"""``GET /ui/artifacts/{artifact_id}`` behind ``serve --auth token`` (Streamable HTTP and SSE apps, real
HTTP on 127.0.0.1): the owner's token gets the bytes as an attachment; another tenant's token gets
the very 404 an id that never existed gets; no token is a 401, a token without ``artifact.read`` a 403.
The viewer's page itself stays open (it holds no data)."""

from __future__ import annotations

import os
from typing import Literal

import httpx2
import pytest

from rath_mcp.principal import GRANTS
from runtime import Runtime
from runtime.access.tokens import TokenService
from runtime.ids import new_id
from tests.auth.conftest import rath_http

pytestmark = pytest.mark.anyio


async def token(rt: Runtime, tenant: str, grants: list[str]) -> dict[str, str]:
    _, text = await TokenService(rt.store.tokens(), GRANTS).create(tenant, "web", grants)
    return {"Authorization": f"Bearer {text}"}


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_the_owner_downloads_the_bytes_and_another_tenant_gets_the_404_of_a_random_id(
    rt: Runtime, transport: Literal["http", "sse"]
) -> None:
    data = os.urandom(3 * 1024 * 1024 + 11)  # several pieces of the stream
    with rt.scope("acme", "web"):
        saved = await rt.artifacts.save(data, name="résumé final.pdf")
    owner = await token(rt, "acme", ["artifact.read"])
    stranger = await token(rt, "globex", ["admin"])
    no_grant = await token(rt, "acme", ["session.read"])
    async with rath_http(rt, transport) as served, httpx2.AsyncClient(base_url=served.base) as http:
        got = await http.get(f"/ui/artifacts/{saved.id}", headers=owner)
        assert got.status_code == 200, got.text
        assert got.content == data
        assert got.headers["content-type"] == "application/pdf"
        assert got.headers["content-length"] == str(len(data))
        assert got.headers["content-disposition"] == (
            "attachment; filename=\"r_sum_ final.pdf\"; filename*=UTF-8''r%C3%A9sum%C3%A9%20final.pdf"
        )
        assert "sandbox" in got.headers["content-security-policy"]

        theirs = await http.get(f"/ui/artifacts/{saved.id}", headers=stranger)
        random_id = new_id("art")
        never = await http.get(f"/ui/artifacts/{random_id}", headers=owner)
        assert theirs.status_code == never.status_code == 404
        assert theirs.text == never.text.replace(random_id, saved.id)  # the same words, the id aside
        assert data[:64] not in theirs.content

        assert (await http.get(f"/ui/artifacts/{saved.id}")).status_code == 401
        refused = await http.get(f"/ui/artifacts/{saved.id}", headers=no_grant)
        assert refused.status_code == 403 and "artifact.read" in refused.json()["error_description"]
        assert (await http.get(f"/ui/runs/{new_id('run')}")).status_code == 200  # the page: no token needed
