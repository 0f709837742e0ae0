"""``rt.artifacts`` over a real runtime, the same tests on ``file://`` and ``s3://`` (SeaweedFS): save, read
back byte-equal, list, dedup, delete, scope, limits."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runtime import Runtime
from runtime.artifacts.blobs import open_blob_store
from runtime.errors import InvalidInputError, NotFoundError
from runtime.sandbox.base import PathEscapeError, SandboxFileNotFoundError

pytestmark = pytest.mark.anyio


async def test_save_read_list_dedup_delete(blob_url: str, tmp_path: Path) -> None:
    async with Runtime.open(tmp_path / "home", workers=0, artifacts=blob_url) as rt:
        data = os.urandom(300_000)
        first = await rt.artifacts.save(data, name="data.bin")
        second = await rt.artifacts.save(data, name="copy.bin")  # the same bytes: one blob
        text = await rt.artifacts.save(b"# hi\n", name="notes.md")
        assert (first.size, first.mime_type, text.mime_type) == (300_000, "application/octet-stream", "text/markdown")
        assert first.key == second.key and first.id != second.id
        got, body = await rt.artifacts.read(first.id)
        assert got == first and body == data
        _, pieces = await rt.artifacts.stream(second.id)
        assert b"".join([p async for p in pieces]) == data
        page, cursor = await rt.artifacts.list(limit=2)
        assert [a.id for a in page] == [first.id, second.id] and cursor == second.id
        rest, end = await rt.artifacts.list(cursor=cursor)
        assert [a.id for a in rest] == [text.id] and end is None

        blobs = open_blob_store(blob_url)
        await rt.artifacts.delete(first.id)
        assert await blobs.exists(first.key)  # still named by the copy
        assert (await rt.artifacts.read(second.id))[1] == data
        await rt.artifacts.delete(second.id)
        assert not await blobs.exists(first.key)
        for gone in (first.id, "art_0190f3c2a1b4e5f60718293a", "nonsense"):
            with pytest.raises(NotFoundError, match=f"artifact {gone} not found"):
                await rt.artifacts.get(gone)

        with rt.scope("other", "web"):  # another tenant: "not found", as a random id
            with pytest.raises(NotFoundError, match=f"artifact {text.id} not found"):
                await rt.artifacts.read(text.id)
            with pytest.raises(NotFoundError):
                await rt.artifacts.delete(text.id)
            theirs = await rt.artifacts.save(b"# hi\n", name="notes.md")
            assert theirs.key != text.key  # content is shared within a tenant/project only
        assert (await rt.artifacts.read(text.id))[1] == b"# hi\n"


async def test_a_workspace_file_is_saved_with_the_sandbox_s_path_checks(tmp_path: Path) -> None:
    async with Runtime.open(tmp_path / "home", workers=0) as rt:
        session = await rt.sessions.create([{"kind": "user", "content": "hi"}])
        box = await rt.sandboxes.get(session.placement)
        await box.write_file("out/report.csv", "a,b\n1,2\n")
        saved = await rt.artifacts.save_from_session(session.id, "out/report.csv")
        assert (saved.name, saved.mime_type, saved.session_id) == ("report.csv", "text/csv", session.id)
        assert (await rt.artifacts.read(saved.id))[1] == b"a,b\n1,2\n"
        with pytest.raises(PathEscapeError):
            await rt.artifacts.save_from_session(session.id, "../../rath.db")
        with pytest.raises(PathEscapeError):
            await rt.artifacts.save_from_session(session.id, "/etc/passwd")
        with pytest.raises(SandboxFileNotFoundError):
            await rt.artifacts.save_from_session(session.id, "missing.txt")
        with pytest.raises(Exception, match="director"):
            await rt.artifacts.save_from_session(session.id, "out")
        page, _ = await rt.artifacts.list(session_id=session.id)
        assert [a.id for a in page] == [saved.id]


async def test_the_size_limit_and_quota_refuse_before_anything_is_written(tmp_path: Path) -> None:
    async with Runtime.open(tmp_path / "home", workers=0) as rt:
        service = rt.artifacts
        service.max_bytes, service.quota_bytes = 10, 15
        with pytest.raises(InvalidInputError, match="over the artifact size limit of 10 bytes"):
            await service.save(b"x" * 11, name="big")
        await service.save(b"x" * 10, name="a")
        with pytest.raises(InvalidInputError, match="over its quota of 15"):
            await service.save(b"y" * 6, name="b")
        assert [a.name for a in (await service.list())[0]] == ["a"]
        assert sorted(p.name for p in (tmp_path / "home" / "artifacts").rglob("*") if p.is_file()) == [
            (await service.list())[0][0].sha256
        ]


async def test_a_delete_racing_a_save_of_the_same_content_keeps_the_bytes(blob_url: str, tmp_path: Path) -> None:
    """The save's row lands after the delete's count of references and before its removal of the bytes:
    the delete moves them aside, counts again, and puts them back."""
    async with Runtime.open(tmp_path / "home", workers=0, artifacts=blob_url) as rt:
        service = rt.artifacts
        first = await service.save(b"shared bytes", name="a.txt")
        records = service.records
        racing: list[str] = []

        class SaveLandsInBetween:  # the delete's records, with a save committing right after its count
            def __getattr__(self, name: str) -> object:
                return getattr(records, name)

            async def delete(self, artifact_id: str, token: str) -> object:
                result = await records.delete(artifact_id, token)
                service.records = records
                racing.append((await service.save(b"shared bytes", name="b.txt")).id)
                return result

        service.records = SaveLandsInBetween()  # type: ignore[assignment]
        await service.delete(first.id)
        assert (await service.read(racing[0]))[1] == b"shared bytes"
        assert [key for key, _ in await service.blobs.listed("local/default")] == [first.key]


async def test_a_gc_pass_removes_only_old_bytes_no_artifact_names(blob_url: str, tmp_path: Path) -> None:
    async with Runtime.open(tmp_path / "home", workers=0, artifacts=blob_url) as rt:
        kept = await rt.artifacts.save(b"kept", name="kept.txt")
        orphan = await rt.artifacts.save(b"orphan", name="orphan.txt")
        await rt.artifacts.records.delete(orphan.id, "t")  # as a save that died between its upload and its row
        assert await rt.artifacts.collect(older_than_s=3600) == []  # too young: a save may be under way
        assert await rt.artifacts.collect(older_than_s=-60) == [orphan.key]
        assert [key for key, _ in await rt.artifacts.blobs.listed("local/default")] == [kept.key]
        assert (await rt.artifacts.read(kept.id))[1] == b"kept"


async def test_the_limits_come_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RATH_ARTIFACT_MAX_BYTES", "1K")
    monkeypatch.setenv("RATH_ARTIFACT_QUOTA", "2K")
    async with Runtime.open(tmp_path / "home", workers=0) as rt:
        assert (rt.artifacts.max_bytes, rt.artifacts.quota_bytes) == (1024, 2048)
        with pytest.raises(InvalidInputError, match="over the artifact size limit of 1024 bytes"):
            await rt.artifacts.save(b"x" * 1025, name="big")
    monkeypatch.setenv("RATH_ARTIFACT_QUOTA", "lots")
    with pytest.raises(InvalidInputError, match="RATH_ARTIFACT_QUOTA 'lots' is not a size"):
        async with Runtime.open(tmp_path / "home", workers=0):
            pass
