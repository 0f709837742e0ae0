"""Artifacts: keep files beyond their sandbox, read them back, share one copy of the same bytes.

Saves bytes and a file of a session's sandbox workspace as artifacts, lists the session's, reads
one back, and deletes one. The bytes go to $RATH_ARTIFACTS (file:///DIR or s3://BUCKET/PREFIX, see
docs/artifacts.md), else HOME/artifacts.

Run it:  python examples/artifacts.py      (state goes to $RATH_HOME, else ~/.rath)
"""

from __future__ import annotations

import anyio

from runtime import Runtime


async def main() -> None:
    async with Runtime.open() as rt:
        session = await rt.sessions.create([{"kind": "user", "content": "write the report"}])
        session_id = session.id
        sandbox = await rt.sandboxes.get(session.placement)
        await sandbox.write_file("out/report.md", "# Report\n\nAll good.\n")

        saved = await rt.artifacts.save(b"a,b\n1,2\n", name="table.csv", session_id=session_id)  # bytes, or a Path
        kept = await rt.artifacts.save_from_session(session_id, "out/report.md")  # a workspace file
        meta, data = await rt.artifacts.read(kept.id)
        page, cursor = await rt.artifacts.list(session_id=session_id)
        await rt.artifacts.delete(saved.id)

        print(f"saved {saved.name} ({saved.size} bytes, {saved.mime_type}) and {kept.name} as {kept.uri}")
        print(f"read back {meta.name}: {str(data, 'utf-8').splitlines()[0]!r}")  # data: a buffer, not copied
        print(f"the session had {len(page)} artifact(s) (more after them: {cursor is not None}); {saved.id} deleted")
        twice = [await rt.artifacts.save(b"same bytes", name=f"copy-{i}.txt") for i in range(2)]
        print(f"two artifacts of the same bytes share one copy: {twice[0].sha256 == twice[1].sha256}")


if __name__ == "__main__":
    anyio.run(main)
