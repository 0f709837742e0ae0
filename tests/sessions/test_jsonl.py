"""JSONL export and import: content, lineage, usage and metadata round-trip exactly; bad input writes nothing."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runtime import ConflictError, InvalidInputError, NotFoundError, Placement, Runtime, Usage
from runtime.sessions import ToolCall, ToolCallFunction

pytestmark = pytest.mark.anyio


def count_rows(rt: Runtime) -> tuple[int, int, int, int]:
    """Rows of every session table, read straight from the database file."""
    conn = sqlite3.connect(rt.home / "rath.db")
    try:
        s, p, g, c = (
            int(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0])
            for t in ("sessions", "session_parents", "segments", "chunks")
        )
        return s, p, g, c
    finally:
        conn.close()


async def diamond(rt: Runtime) -> str:
    """A merged session with tool calls, usage, metadata and a fork-merge diamond behind it."""
    call = ToolCall(id="c1", function=ToolCallFunction(name="grep", arguments='{"q": "é"}'))
    root = await rt.sessions.create(
        [{"kind": "system", "content": "you are terse"}, {"kind": "user", "content": "find 東京"}],
        placement=Placement(backend="local", workspace="ws1"),
        usage=Usage(prompt_tokens=5, total_tokens=5),
        metadata={"owner": "ana", "nested": {"k": [1, 2.5, None, True]}},
    )
    left, right = await rt.sessions.fork(root.id, count=2)
    a = await rt.sessions.append(
        left.id,
        [{"kind": "assistant", "content": "", "tool_calls": [call.model_dump()]}],
        usage=Usage(completion_tokens=3, total_tokens=3),
    )
    result = {"kind": "tool_result", "content": "x\ny", "tool_call_id": "c1", "name": "grep"}
    a2 = await rt.sessions.append(a.id, [result])
    b = await rt.sessions.append(right.id, [{"kind": "assistant", "content": "done"}], usage=Usage(total_tokens=2))
    return (await rt.sessions.merge([a2.id, b.id])).id


async def test_export_then_import_into_another_home_round_trips_exactly(tmp_path: Path) -> None:
    async with Runtime.open(tmp_path / "one") as rt1:
        sid = await diamond(rt1)
        text = await rt1.sessions.export_jsonl(sid)
        original = await rt1.sessions.get(sid)
        up = await rt1.sessions.lineage(sid, down=False)
    async with Runtime.open(tmp_path / "two") as rt2:
        info = await rt2.sessions.import_jsonl(text)
        assert info.id == sid
        copy = await rt2.sessions.get(sid)
        assert copy == original  # id, parents, op, chunks, placement, usage, metadata, created_at
        lineage = await rt2.sessions.lineage(sid, down=False)
        assert {(e.parent, e.child) for e in lineage.edges} == {(e.parent, e.child) for e in up.edges}
        assert [(n.id, n.op, n.length) for n in lineage.nodes] == [(n.id, n.op, n.length) for n in up.nodes]
        assert [n.stub for n in lineage.nodes] == [n.id != sid for n in lineage.nodes]  # ancestors: lineage only
        assert await rt2.sessions.export_jsonl(sid) == text  # and the export of the copy is the same text
        with pytest.raises(NotFoundError):
            await rt2.sessions.get(up.nodes[0].id)  # a stub is not a session here


@pytest.mark.parametrize(
    "forge",
    [
        lambda h: h["usage"].update(total_tokens=h["usage"]["total_tokens"] + 1),
        lambda h: h.update(placement={"backend": "local", "workspace": "elsewhere"}),
        lambda h: h["metadata"].update(owner="mallory"),
        lambda h: h.update(op="import"),
        lambda h: h.update(parents=[]),
    ],
    ids=["usage", "placement", "metadata", "op", "parents"],
)
async def test_import_is_idempotent_and_refuses_a_different_session_under_the_same_id(
    rt: Runtime, forge: Callable[[dict[str, Any]], None]
) -> None:
    sid = await diamond(rt)
    text = await rt.sessions.export_jsonl(sid)
    before = count_rows(rt)
    assert (await rt.sessions.import_jsonl(text)).id == sid
    assert count_rows(rt) == before
    lines = text.splitlines()
    header = json.loads(lines[0])
    forge(header)
    forged = "\n".join([json.dumps(header), *lines[1:]])
    with pytest.raises(ConflictError, match="already exists here with different content"):
        await rt.sessions.import_jsonl(forged)
    assert count_rows(rt) == before


async def test_an_imported_session_still_shares_history_when_merged(tmp_path: Path) -> None:
    async with Runtime.open(tmp_path / "one") as rt1:
        root = await rt1.sessions.create([{"kind": "user", "content": "p"}], usage=Usage(total_tokens=10))
        a = await rt1.sessions.append(root.id, [{"kind": "user", "content": "a"}], usage=Usage(total_tokens=1))
        b = await rt1.sessions.append(root.id, [{"kind": "user", "content": "b"}], usage=Usage(total_tokens=2))
        texts = [await rt1.sessions.export_jsonl(x) for x in (root.id, a.id, b.id)]
    async with Runtime.open(tmp_path / "two") as rt2:
        for text in texts:
            await rt2.sessions.import_jsonl(text)
        m = await rt2.sessions.merge([a.id, b.id])
        assert [c.content for c in await rt2.sessions.chunks(m.id)] == ["p", "a", "b"]
        assert m.usage == Usage(total_tokens=13)


async def test_the_same_id_in_another_tenant_of_the_home_is_a_conflict(home: Path) -> None:
    async with Runtime.open(home, tenant="acme") as rt_a:
        sid = await diamond(rt_a)
        text = await rt_a.sessions.export_jsonl(sid)
    async with Runtime.open(home, tenant="globex") as rt_b:
        before = count_rows(rt_b)
        with pytest.raises(ConflictError, match="already used in this home"):
            await rt_b.sessions.import_jsonl(text)
        assert count_rows(rt_b) == before  # no lineage stubs left behind either
        with pytest.raises(NotFoundError):
            await rt_b.sessions.info(sid)


def _export_lines() -> list[str]:
    header = {
        "type": "session",
        "format": "rath-session/1",
        "id": "ses_0190f3c2a1b4e5f60718293a",
        "parents": ["ses_0190f3c2a1b4e5f607182939"],
        "op": "append",
        "placement": {"backend": "local", "workspace": None},
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        "metadata": {},
        "created_at": 1.0,
        "length": 1,
    }
    chunk = {"type": "chunk", "uid": "u1", "kind": "user", "content": "hi"}
    ancestor: dict[str, object] = {"type": "ancestor", "id": "ses_0190f3c2a1b4e5f607182939", "parents": []}
    ancestor |= {"op": "create", "length": 0, "created_at": 0.5}
    return [json.dumps(header), json.dumps(chunk), json.dumps(ancestor)]


def _with(line: int, **changes: object) -> str:
    lines = _export_lines()
    row = json.loads(lines[line])
    for key, value in changes.items():
        if value is None and key in row:
            del row[key]
        else:
            row[key] = value
    lines[line] = json.dumps(row)
    return "\n".join(lines)


MALFORMED = {
    "empty": ("", "the JSONL is empty"),
    "blank lines": ("\n  \n", "the JSONL is empty"),
    "not json": (_export_lines()[0] + "\n{oops", "line 2 of the JSONL: not valid JSON"),
    "not an object": ("[1, 2]", "line 1 of the JSONL: each line must be a JSON object"),
    "chunk first": ("\n".join(_export_lines()[1:]), "line 1 of the JSONL: the first line must be the session header"),
    "wrong format": (_with(0, format="rath-session/9"), "format 'rath-session/1'"),
    "bad op": (_with(0, op="teleport"), "line 1 of the JSONL: bad session header: op"),
    "negative usage": (_with(0, usage={"total_tokens": -3}), "usage.total_tokens"),
    "bad id": (_with(0, id="hello"), "'hello' is not a session id"),
    "bad parent id": (_with(0, parents=["../etc"]), "'../etc' is not a session id"),
    "bad chunk kind": (_with(1, kind="robot"), "line 2 of the JSONL: kind"),
    "chunk without uid": (_with(1, uid=None), "line 2 of the JSONL: a chunk needs its 'uid'"),
    "unknown line": (_with(2, type="comment"), "line 3 of the JSONL: unknown line type 'comment'"),
    "bad ancestor parents": (_with(2, parents="ses_x"), "line 3 of the JSONL: an ancestor's 'parents' must be a list"),
    "count mismatch": (_with(0, length=2), "the header says 2 chunks but the JSONL holds 1"),
    "chunk after ancestor": (
        "\n".join([*_export_lines(), _export_lines()[1]]),
        "line 4 of the JSONL: chunk lines must come before ancestor lines",
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
async def test_malformed_jsonl_is_refused_clearly_and_writes_nothing(rt: Runtime, case: str) -> None:
    text, message = MALFORMED[case]
    before = count_rows(rt)
    with pytest.raises(InvalidInputError, match=message) as info:
        await rt.sessions.import_jsonl(text)
    assert "session_export" in str(info.value) or "export the session again" in str(info.value)
    assert count_rows(rt) == before


async def test_the_well_formed_sample_imports(rt: Runtime) -> None:
    """The malformed cases above are edits of this valid file; it must import as is."""
    info = await rt.sessions.import_jsonl("\n".join(_export_lines()))
    assert info.id == "ses_0190f3c2a1b4e5f60718293a"
    assert (await rt.sessions.get(info.id)).chunks[0].content == "hi"
    assert [n.stub for n in (await rt.sessions.lineage(info.id)).nodes] == [True, False]
