"""``rath-mcp sessions import FILE_OR_FOLDER…``: session files into the store, one line per file.

Each file is a session OpenRath 2.0.0 saved (``~/.openrath/sessions/<uuid>.jsonl``, recognised by its
header) or a ``session_export`` JSONL of rath-mcp. A folder stands for its ``*.jsonl`` files (OpenRath's
``.__partial__`` files of sessions that never closed are left out: name one to import it). OpenRath
sessions of one command are imported parents first, so a fork is linked to the parent it came from
and shares its chunks' identities whatever order the files were named in.

Every file is imported whole or not at all; one that fails is reported on its line and the rest go on.
The exit code is 1 when any file failed.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime import Runtime, resolve_home
from runtime.errors import RathError
from runtime.sessions import openrath
from runtime.sessions.model import Placement

HELP = "import session files: OpenRath 2.0.0 sessions (e.g. ~/.openrath/sessions/) or session_export JSONL"


def add_import(sessions: Any, home_arg: Any) -> None:
    """Register ``sessions import`` on the ``sessions`` subparsers."""
    p = sessions.add_parser("import", help=HELP)
    p.add_argument("paths", nargs="+", metavar="FILE_OR_FOLDER", help="session files, or folders of *.jsonl files")
    home_arg(p)


@dataclass
class _File:
    path: Path
    text: str = ""
    saved: openrath.OpenRathSession | None = None  # an OpenRath session, parsed
    error: str | None = None


def _files(paths: list[str]) -> list[_File]:
    found: list[_File] = []
    for given in paths:
        path = Path(given).expanduser()
        if path.is_dir():
            found.extend(_File(p) for p in sorted(path.glob("*.jsonl")) if p.is_file())
        else:
            found.append(_File(path))
    for item in found:
        try:
            item.text = item.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            item.error = f"cannot be read ({getattr(exc, 'strerror', None) or exc})"
            continue
        if openrath.is_openrath(item.text):
            try:
                item.saved = openrath.parse(item.text, str(item.path))
            except RathError as exc:
                item.error = str(exc)
    return found


def _parents_first(files: list[_File]) -> list[_File]:
    """OpenRath sessions after the parents named among them (the rest keep their order)."""
    by_id = {f.saved.openrath_id: f for f in files if f.saved is not None}
    ordered: list[_File] = []
    placed: set[int] = set()

    def place(item: _File, seen: frozenset[str]) -> None:
        if id(item) in placed:
            return
        if item.saved is not None:
            for parent in item.saved.parents:
                if parent in by_id and parent not in seen:  # a cycle (malformed files) just stops here
                    place(by_id[parent], seen | {item.saved.openrath_id})
        placed.add(id(item))
        ordered.append(item)

    for item in files:
        place(item, frozenset())
    return ordered


async def run_import(args: argparse.Namespace) -> int:
    """Import every file named; print one line per file; 1 when any failed."""
    files = _parents_first(_files(args.paths))
    if not files:
        print("no session files found (a folder is read for *.jsonl files)")
        return 1
    failed = 0
    async with Runtime.open(resolve_home(args.home), store=args.store, workers=0) as rt:
        for item in files:
            line = item.error and f"failed    {item.path}: {item.error}"
            if line is None:
                try:
                    line = await _import_one(rt, item)
                except RathError as exc:
                    line = f"failed    {item.path}: {' '.join(str(exc).split())}"
            failed += line.startswith("failed")
            print(line, flush=True)
    return 1 if failed else 0


async def _import_one(rt: Runtime, item: _File) -> str:
    sessions = rt.sessions
    if item.saved is None:  # a rath-mcp export (its own checks name what is wrong with anything else)

        def check(placement: Placement) -> Placement:
            return rt.sandboxes.placement(placement.workspace, placement.backend)

        info = await sessions.import_jsonl(item.text, check_placement=check)
        return f"imported  {item.path} -> {info.id} ({info.length} chunks, session_export JSONL)"
    saved = item.saved
    existed = await _is_session(rt, saved.session_id)
    info = await sessions.import_jsonl(item.text)
    verb = "unchanged" if existed else "imported "
    parents = f", parents {','.join(info.parents)}" if info.parents else ""
    closed = "" if saved.closed else ", not closed cleanly (no trailer)"
    return (
        f"{verb} {item.path} -> {info.id} ({info.length} chunks, OpenRath {saved.openrath_id}"
        f"{parents}, {info.usage.total_tokens} tokens{closed})"
    )


async def _is_session(rt: Runtime, session_id: str) -> bool:
    """Whether ``session_id`` is a session here (not a lineage stub a child's import left)."""
    try:
        await rt.sessions.info(session_id)
    except RathError:
        return False
    return True
