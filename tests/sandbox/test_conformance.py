"""The sandbox contract: every test body here runs against every backend flavour (see conftest)."""

from __future__ import annotations

import pytest

from runtime.errors import NotFoundError, UsageError
from runtime.sandbox import (
    Backend,
    FileTooLargeError,
    InvalidWorkspaceError,
    NotAFileError,
    PathEscapeError,
    Sandbox,
    SandboxError,
    SandboxFileNotFoundError,
    UnsupportedLanguageError,
)
from tests.sandbox.conftest import FILE_CAP, HOST_CANARY, SMALL_CAP

pytestmark = pytest.mark.anyio


async def test_open_creates_a_workspace_then_attaches_to_it_until_destroyed(backend: Backend) -> None:
    first = await backend.open("one")
    assert first.workspace == "one" and first.backend == backend.name
    assert await first.list_dir(".") == []
    await first.write_file("notes.txt", "kept")
    await first.close()

    again = await backend.open("one")
    assert await again.read_file("notes.txt") == b"kept"
    await again.close()

    await backend.destroy("one")
    fresh = await backend.open("one")
    assert await fresh.list_dir(".") == []
    await fresh.close()


async def test_capabilities_describe_the_backend(sandbox: Sandbox, flavour: str) -> None:
    caps = sandbox.capabilities
    assert caps.backend == sandbox.backend
    assert caps.isolation == {"local-bwrap": "bubblewrap", "local-plain": "none", "opensandbox": "container"}[flavour]
    assert caps.max_output_bytes == SMALL_CAP
    assert "python" in caps.languages


async def test_exit_codes_are_reported(sandbox: Sandbox) -> None:
    assert (await sandbox.run_command("true")).exit_code == 0
    assert (await sandbox.run_command("exit 7")).exit_code == 7
    assert (await sandbox.run_command(["sh", "-c", "exit 3"])).exit_code == 3
    failed = await sandbox.run_command("false")
    assert failed.exit_code == 1 and not failed.ok and not failed.timed_out


async def test_stdout_and_stderr_are_kept_apart(sandbox: Sandbox) -> None:
    result = await sandbox.run_command("echo to-out; echo to-err >&2")
    assert result.stdout == "to-out\n"
    assert result.stderr == "to-err\n"
    assert result.ok and not result.truncated and result.exit_code == 0


async def test_a_missing_executable_fails_with_a_message(sandbox: Sandbox) -> None:
    result = await sandbox.run_command("no-such-program-xyz")
    assert result.exit_code == 127
    assert "no-such-program-xyz" in result.stderr
    direct = await sandbox.run_command(["no-such-program-xyz", "--flag"])
    assert direct.exit_code == 127 and not direct.timed_out
    assert "no-such-program-xyz" in direct.stderr
    assert (await sandbox.run_command("echo usable")).ok


async def test_env_reaches_the_command_and_host_env_does_not(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HOST_CANARY, "leaked-from-test-host")
    result = await sandbox.run_command(
        f'echo "$GREETING"; echo "canary=${{{HOST_CANARY}:-absent}}"', env={"GREETING": "hello world"}
    )
    assert result.stdout == "hello world\ncanary=absent\n"


async def test_invalid_env_is_refused(sandbox: Sandbox) -> None:
    with pytest.raises(SandboxError, match="not valid"):
        await sandbox.run_command("true", env={"A=B": "x"})


async def test_stdin_reaches_the_command(sandbox: Sandbox) -> None:
    assert (await sandbox.run_command("cat", stdin=b"raw\x00bytes")).stdout == "raw\x00bytes"
    assert (await sandbox.run_command(["wc", "-c"], stdin="héllo")).stdout.strip() == "6"
    no_stdin = await sandbox.run_command("cat", timeout_s=10)
    assert no_stdin.stdout == "" and not no_stdin.timed_out  # EOF at once, never a hang


async def test_a_timeout_kills_the_command_and_leaves_the_sandbox_usable(sandbox: Sandbox) -> None:
    # The background sleep holds the output pipe for an hour: the call comes back at all only because the
    # timeout killed the command's whole process group (a hang would be stopped by the test timeout).
    slow = await sandbox.run_command("echo started; sleep 3600 & sleep 3600", timeout_s=0.5)
    assert slow.timed_out and slow.exit_code == -1 and not slow.ok
    after = await sandbox.run_command("echo still-here")
    assert after.stdout == "still-here\n" and after.ok
    await sandbox.write_file("after.txt", "ok")
    assert await sandbox.read_file("after.txt") == b"ok"


async def test_bytes_round_trip_exactly(sandbox: Sandbox) -> None:
    blob = bytes(range(256)) * 64
    await sandbox.write_file("bin/all-bytes.dat", blob)
    assert await sandbox.read_file("bin/all-bytes.dat") == blob
    await sandbox.write_file("text.txt", "naïve — 漢字\n")
    assert (await sandbox.read_file("text.txt")).decode("utf-8") == "naïve — 漢字\n"
    await sandbox.write_file("empty", b"")
    assert await sandbox.read_file("empty") == b""
    counted = await sandbox.run_command("wc -c < bin/all-bytes.dat")
    assert counted.stdout.strip() == str(len(blob))


async def test_files_written_by_commands_are_readable_and_vice_versa(sandbox: Sandbox) -> None:
    await sandbox.write_file("in.txt", "from the api\n")
    result = await sandbox.run_command("cat in.txt > out.txt && echo made >> out.txt")
    assert result.ok
    assert await sandbox.read_file("out.txt") == b"from the api\nmade\n"


async def test_writes_create_parents_and_overwrite(sandbox: Sandbox) -> None:
    await sandbox.write_file("deep/er/file.txt", "one")
    await sandbox.write_file("deep/er/file.txt", "two")
    assert await sandbox.read_file("deep/er/file.txt") == b"two"
    assert await sandbox.exists("deep/er") and await sandbox.exists("deep/er/file.txt")


async def test_missing_files_are_clear_not_found_errors(sandbox: Sandbox) -> None:
    assert not await sandbox.exists("nope.txt")
    with pytest.raises(SandboxFileNotFoundError, match=r"nope\.txt") as caught:
        await sandbox.read_file("nope.txt")
    assert isinstance(caught.value, NotFoundError) and isinstance(caught.value, UsageError)
    with pytest.raises(SandboxFileNotFoundError):
        await sandbox.list_dir("no-dir")
    with pytest.raises(SandboxFileNotFoundError):
        await sandbox.run_command("true", cwd="no-dir")


async def test_directories_and_files_are_not_confused(sandbox: Sandbox) -> None:
    await sandbox.write_file("d/f.txt", "x")
    with pytest.raises(NotAFileError, match="directory"):
        await sandbox.read_file("d")
    with pytest.raises(NotAFileError):
        await sandbox.list_dir("d/f.txt")
    with pytest.raises(NotAFileError):
        await sandbox.write_file("d", "x")


async def test_listings_are_sorted_by_name_with_kinds_and_sizes(sandbox: Sandbox) -> None:
    for name in ("b.txt", "a.txt", "C.txt", "sub/inner.txt"):
        await sandbox.write_file(name, name * 2)
    listing = await sandbox.list_dir(".")
    assert [e.name for e in listing] == ["C.txt", "a.txt", "b.txt", "sub"]
    assert [e.is_dir for e in listing] == [False, False, False, True]
    assert listing[1].size == len("a.txt") * 2
    assert [e.name for e in await sandbox.list_dir("sub")] == ["inner.txt"]


async def test_commands_run_in_the_requested_directory(sandbox: Sandbox) -> None:
    await sandbox.write_file("sub/here.txt", "x")
    assert (await sandbox.run_command("ls", cwd="sub")).stdout == "here.txt\n"
    with pytest.raises(NotAFileError, match="not a directory"):
        await sandbox.run_command("true", cwd="sub/here.txt")


async def test_two_sandboxes_are_isolated(backend: Backend) -> None:
    one, two = await backend.open("one"), await backend.open("two")
    try:
        await one.write_file("secret.txt", "only in one")
        assert not await two.exists("secret.txt")
        assert (await two.run_command("ls -A")).stdout == ""
        assert (await two.run_command("cat secret.txt")).exit_code != 0
        await two.write_file("secret.txt", "two's own")
        assert await one.read_file("secret.txt") == b"only in one"
    finally:
        await one.close()
        await two.close()


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/passwd", "a/../../outside.txt", "~/x", ".."])
async def test_paths_leaving_the_workspace_are_refused(sandbox: Sandbox, path: str) -> None:
    with pytest.raises(PathEscapeError, match="workspace"):
        await sandbox.read_file(path)
    with pytest.raises(PathEscapeError):
        await sandbox.write_file(path, "x")
    with pytest.raises(PathEscapeError):
        await sandbox.list_dir(path)
    with pytest.raises(PathEscapeError):
        await sandbox.exists(path)
    with pytest.raises(PathEscapeError):
        await sandbox.run_command("true", cwd=path)


async def test_dotdot_inside_the_workspace_is_fine(sandbox: Sandbox) -> None:
    await sandbox.write_file("a/../b.txt", "ok")
    assert await sandbox.read_file("b.txt") == b"ok"
    assert await sandbox.exists("./a/../b.txt")
    await sandbox.write_file("~backup..txt", "plain name")
    assert [e.name for e in await sandbox.list_dir("")] == ["b.txt", "~backup..txt"]


async def test_huge_output_is_truncated_and_says_so(sandbox: Sandbox) -> None:
    result = await sandbox.run_command(f"head -c {SMALL_CAP * 5} /dev/zero | tr '\\0' 'x'; echo err >&2")
    assert result.truncated and result.ok
    assert result.stdout.startswith("x" * SMALL_CAP)
    assert "output truncated" in result.stdout and len(result.stdout) < SMALL_CAP + 200
    assert result.stderr == "err\n"


async def test_endless_output_stops_at_the_timeout(sandbox: Sandbox) -> None:
    result = await sandbox.run_command("yes", timeout_s=1)
    assert result.timed_out and result.truncated
    assert len(result.stdout) < SMALL_CAP + 200


async def test_run_code_runs_python_and_shell(sandbox: Sandbox) -> None:
    py = await sandbox.run_code("import sys\nprint(sum(range(10)))\nprint('warn', file=sys.stderr)\nsys.exit(2)")
    assert (py.stdout, py.stderr, py.exit_code) == ("45\n", "warn\n", 2)
    sh = await sandbox.run_code('echo "$((6 * 7))"', language="sh")
    assert sh.stdout == "42\n"
    with pytest.raises(UnsupportedLanguageError, match="python"):
        await sandbox.run_code("x", language="cobol")


async def test_bad_commands_are_refused_before_running(sandbox: Sandbox) -> None:
    bad_commands: list[str | list[str]] = ["", "   ", []]
    for bad in bad_commands:
        with pytest.raises(SandboxError, match="command"):
            await sandbox.run_command(bad)
    with pytest.raises(SandboxError, match="timeout"):
        await sandbox.run_command("true", timeout_s=0)


@pytest.mark.parametrize("name", ["", "a/b", "..", "../x", "with space", "x" * 200])
async def test_workspace_names_are_validated(backend: Backend, name: str) -> None:
    with pytest.raises(InvalidWorkspaceError, match="workspace name"):
        await backend.open(name)


async def test_clone_copies_a_workspace_that_then_diverges(backend: Backend) -> None:
    parent = await backend.open("parent")
    await parent.write_file("shared.txt", "v1")
    await parent.write_file("dir/nested.bin", bytes(range(256)))
    await backend.clone("parent", "child")
    child = await backend.open("child")
    try:
        assert await child.read_file("shared.txt") == b"v1"
        assert await child.read_file("dir/nested.bin") == bytes(range(256))
        await child.write_file("shared.txt", "v2")
        await child.write_file("only-child.txt", "c")
        assert await parent.read_file("shared.txt") == b"v1"
        assert not await parent.exists("only-child.txt")
    finally:
        await parent.close()
        await child.close()


async def test_clone_refuses_an_existing_target_and_a_missing_source(backend: Backend) -> None:
    for name in ("parent", "copy"):
        await (await backend.open(name)).close()
    with pytest.raises(SandboxError, match="already exists"):
        await backend.clone("parent", "copy")
    with pytest.raises(NotFoundError, match="does not exist"):
        await backend.clone("never-opened", "child")


async def test_reading_a_file_larger_than_the_limit_is_refused_with_advice(sandbox: Sandbox) -> None:
    made = await sandbox.run_command(
        f"head -c {FILE_CAP + 1} /dev/zero > big.bin && head -c {FILE_CAP} /dev/zero > ok.bin"
    )
    assert made.ok
    with pytest.raises(FileTooLargeError, match="head -c"):
        await sandbox.read_file("big.bin")
    assert len(await sandbox.read_file("ok.bin")) == FILE_CAP
