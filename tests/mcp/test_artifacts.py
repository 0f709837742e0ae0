"""Artifact tools and the artifact resource through a real MCP client, in both protocol eras."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp_types import BlobResourceContents, ResourceLink, TextResourceContents

from rath_mcp.server import build_server
from runtime import Runtime
from runtime.flow.workflow import EffectClass, StepContext, Workflow, step
from tests.mcp.conftest import call, call_error

pytestmark = pytest.mark.anyio


async def workspace_session(client: Client, rt: Runtime, files: dict[str, bytes]) -> str:
    session_id = (await call(client, "session_create", message="make a report", workspace="reports"))["session_id"]
    box = await rt.sandboxes.get((await rt.sessions.info(session_id)).placement)
    for path, data in files.items():
        await box.write_file(path, data)
    return str(session_id)


async def test_a_saved_workspace_file_reads_back_through_its_link(client: Client, rt: Runtime) -> None:
    binary = os.urandom(5000)
    sid = await workspace_session(client, rt, {"out/report.md": b"# Report\n\nall good\n", "out/blob.bin": binary})
    saved = await call(client, "artifact_save", session_id=sid, path="out/report.md")
    assert saved["artifact_id"].startswith("art_") and saved["uri"] == f"rath://artifacts/{saved['artifact_id']}"
    assert (saved["name"], saved["size"], saved["mime_type"], saved["session_id"]) == (
        "report.md",
        19,
        "text/markdown",
        sid,
    )

    got = await client.call_tool("artifact_get", {"artifact_id": saved["artifact_id"]})
    assert not got.is_error and got.structured_content == saved
    (link,) = [c for c in got.content if isinstance(c, ResourceLink)]
    assert (str(link.uri), link.name, link.mime_type, link.size) == (saved["uri"], "report.md", "text/markdown", 19)
    (text,) = (await client.read_resource(str(link.uri))).contents
    assert isinstance(text, TextResourceContents) and text.text == "# Report\n\nall good\n"
    assert text.mime_type == "text/markdown"

    blob = await call(client, "artifact_save", session_id=sid, path="out/blob.bin")
    (body,) = (await client.read_resource(blob["uri"])).contents
    assert isinstance(body, BlobResourceContents) and base64.b64decode(body.blob) == binary
    assert body.mime_type == "application/octet-stream"

    listed = await call(client, "artifact_list", session_id=sid, limit=1)
    assert [a["artifact_id"] for a in listed["artifacts"]] == [saved["artifact_id"]]
    rest = await call(client, "artifact_list", cursor=listed["next_cursor"])
    assert [a["artifact_id"] for a in rest["artifacts"]] == [blob["artifact_id"]] and rest["next_cursor"] is None

    deleted = await call(client, "artifact_delete", artifact_id=saved["artifact_id"])
    assert deleted["artifact_id"] == saved["artifact_id"]
    gone = await call_error(client, "artifact_get", artifact_id=saved["artifact_id"])
    assert f"artifact {saved['artifact_id']} not found" in gone


async def test_paths_outside_the_workspace_and_missing_files_are_refused(client: Client, rt: Runtime) -> None:
    sid = await workspace_session(client, rt, {"dir/inner.txt": b"x"})
    for path, words in (
        ("../../rath.db", "leaves the workspace"),
        ("/etc/passwd", "is absolute"),
        ("missing.txt", "missing.txt"),
        ("dir", "director"),
    ):
        error = await call_error(client, "artifact_save", session_id=sid, path=path)
        assert words in error, (path, error)
    assert (await call(client, "artifact_list"))["artifacts"] == []


async def test_a_large_session_export_comes_back_as_a_link_whose_resource_holds_all_of_it(client: Client) -> None:
    sid = (await call(client, "session_create", message="x" * 150_000))["session_id"]
    small = await client.call_tool("session_export", {"session_id": sid})
    assert small.structured_content is not None and small.structured_content["jsonl"] is not None
    for _ in range(2):
        sid = (await call(client, "session_append", session_id=sid, content="y" * 150_000))["session_id"]
    large = await client.call_tool("session_export", {"session_id": sid})
    body = large.structured_content
    assert not large.is_error and body is not None and body["jsonl"] is None
    (link,) = [c for c in large.content if isinstance(c, ResourceLink)]
    assert str(link.uri) == body["uri"] and link.mime_type == "application/x-ndjson" and link.size > 256 * 1024
    assert body["preview"] and len(body["preview"]) <= 1000
    (whole,) = (await client.read_resource(body["uri"])).contents
    assert isinstance(whole, TextResourceContents) and whole.text.startswith(body["preview"])
    assert len(whole.text.encode()) == link.size
    imported = await call(client, "session_import", jsonl=whole.text)  # the whole export: it imports as is
    assert imported["session_id"] == sid


class Chatty(Workflow):
    """Report progress at length: a page of its events is over 256 KB."""

    @step(entry=True, effects=EffectClass.READ_ONLY)
    async def talk(self, state: dict[str, Any], ctx: StepContext) -> dict[str, Any]:
        for i in range(12):
            await ctx.progress(f"{i} " + "z" * 30_000)
        return {}


async def test_a_large_page_of_run_events_comes_back_as_a_link(client: Client, rt: Runtime) -> None:
    name = rt.workflows.register(Chatty).name
    run = await call(client, "run_start", workflow=name, wait_s=20)
    assert run["status"] == "succeeded", run
    small = await call(client, "run_events", run_id=run["run_id"], limit=3)
    assert len(small["events"]) == 3 and "uri" not in small
    large = await client.call_tool("run_events", {"run_id": run["run_id"], "limit": 1000})
    body = large.structured_content
    assert not large.is_error and body is not None and body["events"] == [] and body["next_after_seq"] > 12
    (link,) = [c for c in large.content if isinstance(c, ResourceLink)]
    (whole,) = (await client.read_resource(str(link.uri))).contents
    assert isinstance(whole, TextResourceContents) and whole.mime_type == "application/json"
    events = json.loads(whole.text)
    assert events[-1]["seq"] == body["next_after_seq"] and sum(e["type"] == "step.progress" for e in events) == 12
    listed = await call(client, "artifact_list", run_id=run["run_id"])
    assert [a["artifact_id"] for a in listed["artifacts"]] == [body["artifact_id"]]


async def test_a_large_session_page_comes_back_as_a_link_to_its_chunks(client: Client) -> None:
    sid = (await call(client, "session_create", message="x" * 150_000))["session_id"]
    for letter in "yz":
        sid = (await call(client, "session_append", session_id=sid, content=letter * 150_000))["session_id"]
    small = await call(client, "session_get", session_id=sid, limit=1)
    assert len(small["chunks"]) == 1 and small["next_offset"] == 1 and "uri" not in small and "preview" not in small
    large = await client.call_tool("session_get", {"session_id": sid})
    body = large.structured_content
    assert not large.is_error and body is not None and body["chunks"] == [] and body["next_offset"] is None
    assert body["length"] == 3 and body["preview"] and len(body["preview"]) <= 1000
    (link,) = [c for c in large.content if isinstance(c, ResourceLink)]
    assert str(link.uri) == body["uri"] and link.mime_type == "application/json" and link.size > 256 * 1024
    (whole,) = (await client.read_resource(body["uri"])).contents
    assert isinstance(whole, TextResourceContents) and whole.text.startswith(body["preview"])
    chunks = json.loads(whole.text)
    assert [(c["kind"], c["content"]) for c in chunks] == [("user", s * 150_000) for s in "xyz"]
    again = await call(client, "session_get", session_id=sid)  # the same page asked again: the same artifact
    assert again["artifact_id"] == body["artifact_id"]
    listed = await call(client, "artifact_list", session_id=sid)
    assert [a["artifact_id"] for a in listed["artifacts"]] == [body["artifact_id"]]


async def test_a_commands_long_stdout_is_kept_whole_as_an_artifact_of_the_run(tmp_path: Path) -> None:
    """The agent runs a command printing 340,000 bytes: the model sees its start and the artifact's
    uri; a client reading that link through MCP gets every line."""
    home = tmp_path / "home"
    home.mkdir()
    command = "yes 'rath output line' | head -n 20000; echo done >&2"
    script = [{"tool_calls": [{"name": "run_command", "arguments": {"command": command}}]}, {"content": "Done."}]
    (home / "script.json").write_text(json.dumps({"replies": script}))
    (home / "config.json").write_text(
        json.dumps({"provider": "scripted", "providers": {"scripted": {"script": "script.json"}}})
    )
    async with Runtime.open(home) as rt, Client(build_server(rt)) as client:
        run = await call(client, "run_start", workflow="agent", message="print many lines", wait_s=30)
        assert run["status"] == "succeeded", run["error"]
        told = await call(client, "session_get", session_id=run["output_session_id"])
        (result,) = [json.loads(c["content"]) for c in told["chunks"] if c["kind"] == "tool_result"]
        assert result["exit_code"] == 0 and result["truncated"] is True and result["stderr"] == "done\n"
        kept = result["stdout_artifact"]
        assert "stderr_artifact" not in result and kept["size"] == 20000 * len("rath output line\n")
        assert result["stdout"].startswith("rath output line\n") and len(result["stdout"]) < 60_000
        (whole,) = (await client.read_resource(kept["uri"])).contents
        assert isinstance(whole, TextResourceContents) and whole.mime_type == "text/plain"
        assert whole.text == "rath output line\n" * 20000
        listed = await call(client, "artifact_list", run_id=run["run_id"])
        assert [(a["artifact_id"], a["name"]) for a in listed["artifacts"]] == [
            (kept["artifact_id"], "run_command-stdout.txt")
        ]


async def test_a_runs_agent_saves_the_file_it_was_asked_to_produce(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    report = "# Findings\n\nAll three checks pass.\n"
    script = [
        {
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": "out/report.md", "content": report}},
                {"name": "save_artifact", "arguments": {"path": "out/report.md"}},
                {"name": "save_artifact", "arguments": {"path": "../outside.md"}},
            ]
        },
        {"content": "The report is saved."},
    ]
    (home / "script.json").write_text(json.dumps({"replies": script}))
    (home / "config.json").write_text(
        json.dumps({"provider": "scripted", "providers": {"scripted": {"script": "script.json"}}})
    )
    async with Runtime.open(home) as rt, Client(build_server(rt)) as client:
        run = await call(client, "run_start", workflow="agent", message="write out/report.md and save it", wait_s=30)
        assert run["status"] == "succeeded", run["error"]
        (saved,) = (await call(client, "artifact_list", run_id=run["run_id"]))["artifacts"]
        assert (saved["name"], saved["mime_type"], saved["size"]) == ("report.md", "text/markdown", len(report))
        (body,) = (await client.read_resource(saved["uri"])).contents
        assert isinstance(body, TextResourceContents) and body.text == report
        told = await call(client, "session_get", session_id=run["output_session_id"])
        results = [c["content"] for c in told["chunks"] if c["kind"] == "tool_result"]
        assert saved["artifact_id"] in results[1] and "leaves the workspace" in results[2]
