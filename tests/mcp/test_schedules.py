"""Schedule tools through a real MCP client, and ``rath-mcp schedules list`` (CONTRACT §15)."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from rath_mcp.cli import main
from runtime import Runtime
from tests.mcp.conftest import call, call_error

pytestmark = pytest.mark.anyio


async def test_create_list_update_delete(client: Client, rt: Runtime) -> None:
    made = await call(client, "schedule_create", workflow="echo", cron="0 9 * * 1-5", timezone="Europe/Paris",
                      message="morning digest", name="digest", catch_up="none")  # fmt: skip
    assert made["schedule_id"].startswith("sch_") and made["next_at"] > 0 and made["catch_up"] == "none"
    listed = await call(client, "schedule_list")
    assert [s["schedule_id"] for s in listed["schedules"]] == [made["schedule_id"]]
    paused = await call(client, "schedule_update", schedule_id=made["schedule_id"], paused=True)
    assert paused["paused"] is True
    gone = await call(client, "schedule_delete", schedule_id=made["schedule_id"])
    assert gone == {"schedule_id": made["schedule_id"], "deleted": True}
    assert (await call(client, "schedule_list"))["schedules"] == []


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"workflow": "echo", "cron": "every hour"}, "every hour"),
        ({"workflow": "echo", "cron": "0 * * * *", "timezone": "Europe/Atlantis"}, "Europe/Atlantis"),
        ({"workflow": "nope", "cron": "0 * * * *"}, "nope"),
        ({"workflow": "echo", "cron": "0 * * * *", "input": {"message": 5}}, "input of echo"),
    ],
)
async def test_bad_input_is_an_error_naming_it(client: Client, arguments: dict[str, object], named: str) -> None:
    assert named in await call_error(client, "schedule_create", **arguments)
    assert (await call(client, "schedule_list"))["schedules"] == []


async def test_the_cli_lists_schedules(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    async with Runtime.open(tmp_path, workers=0) as rt:
        made = await rt.schedules.create("echo", "30 6 * * *", name="nightly")
        await rt.schedules.create("echo", "0 * * * *")
        with rt.scope("acme", "web"):
            other = await rt.schedules.create("echo", "0 * * * *")
    assert await anyio_main(["schedules", "list", "--home", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert made["schedule_id"] in out and "name=nightly" in out and other["schedule_id"] not in out
    assert await anyio_main(["schedules", "list", "--home", str(tmp_path), "--tenant", "acme", "--project", "web"]) == 0
    assert other["schedule_id"] in capsys.readouterr().out


async def anyio_main(argv: list[str]) -> int:
    import anyio.to_thread

    return await anyio.to_thread.run_sync(main, argv)
