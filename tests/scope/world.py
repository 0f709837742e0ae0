"""Scope A's objects, made through the real server by a caller of scope A, for other scopes to look for.

Every kind of object a tool, resource, subscription or completion can name: sessions (created,
appended, forked, merged, detached), a run waiting on an interrupt, a finished run with its output
session, an ambiguous effect, memory items (remembered and committed from a session).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp import Client

from runtime import Runtime
from runtime.durable.store import EffectRecord, NewRun
from runtime.ids import new_id
from tests.mcp.conftest import call

A_TENANT, A_PROJECT = "acme", "alpha"
B_TENANT, B_PROJECT = "bravo", "beta"


@dataclass
class World:
    """Ids of scope A's objects, by kind (``session``, ``run``, ``interrupt``, ``effect``, ``memory``, ``uri``,
    ``artifact``)."""

    ids: dict[str, list[str]] = field(default_factory=dict)
    waiting_run: str = ""
    interrupt: str = ""

    def add(self, kind: str, *values: str) -> None:
        self.ids.setdefault(kind, []).extend(values)

    def every(self) -> list[str]:
        return [v for values in self.ids.values() for v in values]

    def first(self, kind: str) -> str:
        return self.ids[kind][0]


async def ambiguous_effect(rt: Runtime, tenant: str, project: str) -> tuple[str, str]:
    """A run of scope A holding an ambiguous effect (written through A's own RunStore, as a worker would).

    Its workflow is one no worker knows, so nothing else touches it. Returns (run id, effect id).
    """
    store = rt.scoped(tenant, project).runs.store
    new = NewRun(workflow="ghost", plan_hash="h", step="first", input_json="{}")
    run_id = await store.create(new, [("run.created", {"workflow": "ghost"})])
    (claim,) = await store.claim("test-worker", 30.0, 1, ["ghost"])
    record = EffectRecord(new_id("eff"), "first", 1, "charge", "non_idempotent", "ambiguous")
    await store.record_effect(run_id, claim.token, record)
    return run_id, record.id


async def populate(client: Client, rt: Runtime) -> World:
    """Make one of everything in the scope ``client`` calls from."""
    world = World()
    first = (await call(client, "session_create", message="scope A's first words", system="be brief"))["session_id"]
    appended = (await call(client, "session_append", session_id=first, content="more of A"))["session_id"]
    forks = (await call(client, "session_fork", session_id=appended, count=2))["session_ids"]
    merged = (await call(client, "session_merge", session_ids=forks))["session_id"]
    detached = (await call(client, "session_detach", session_id=first))["session_id"]
    world.add("session", first, appended, *forks, merged, detached)
    waiting = await call(client, "run_start", workflow="approval", input={"draft": "A's draft"}, wait_s=20)
    assert waiting["status"] == "waiting", waiting
    world.waiting_run = waiting["run_id"]
    world.interrupt = waiting["pending_interrupts"][0]["interrupt_id"]
    done = await call(client, "run_start", workflow="echo", session_id=merged, wait_s=20)
    assert done["status"] == "succeeded", done
    world.add("run", waiting["run_id"], done["run_id"])
    world.add("session", done["output_session_id"])
    world.add("interrupt", world.interrupt)
    ghost_run, effect = await ambiguous_effect(rt, A_TENANT, A_PROJECT)
    world.add("run", ghost_run)
    world.add("effect", effect)
    remembered = await call(client, "memory_remember", content="A's secret: the launch code", path="notes/launch")
    committed = await call(client, "memory_commit", session_id=appended)
    world.add("memory", remembered["memory_id"])
    world.add("uri", remembered["uri"], committed["archived_uri"])
    with rt.scope(A_TENANT, A_PROJECT):  # a file in the session's workspace, kept as an artifact
        box = await rt.sandboxes.get((await rt.sessions.info(appended)).placement)
        await box.write_file("report.txt", "A's report")
    saved = await call(client, "artifact_save", session_id=appended, path="report.txt")
    world.add("artifact", saved["artifact_id"])
    scheduled = await call(client, "schedule_create", workflow="echo", cron="0 0 1 1 *", name="A's yearly")
    world.add("schedule", scheduled["schedule_id"])
    return world


def import_line_with_parent(parent: str, session_id: str) -> str:
    """A JSONL session ``session_id`` whose header names ``parent`` (not among its ancestors)."""
    header: dict[str, Any] = {
        "type": "session",
        "format": "rath-session/1",
        "id": session_id,
        "parents": [parent],
        "op": "append",
        "placement": {},
        "usage": {},
        "metadata": {},
        "created_at": 1.0,
        "length": 0,
    }
    return json.dumps(header)


def dump(db_path: Path) -> dict[str, list[str]]:
    """Every row of every table of the store (a separate connection: it sees what was committed)."""
    with sqlite3.connect(db_path) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return {t: sorted(map(repr, conn.execute(f'SELECT * FROM "{t}"'))) for t in tables}
