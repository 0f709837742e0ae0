"""SandboxRegistry: placements to opened sandboxes, forks with their own workspace, and Runtime wiring."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import anyio
import pytest

from runtime import Placement, Runtime
from runtime.sandbox import InvalidWorkspaceError, SandboxError
from runtime.sandbox.local import LocalBackend, LocalSandbox
from runtime.sandbox.opensandbox import OpenSandboxBackend
from runtime.sandbox.registry import SandboxRegistry
from tests.sandbox.conftest import EMULATOR_API_KEY

pytestmark = pytest.mark.anyio


async def test_a_placement_opens_one_cached_sandbox_per_workspace(tmp_path: Path) -> None:
    registry = SandboxRegistry(tmp_path)
    first = await registry.get(Placement())
    assert first.workspace == "default" and first.backend == "local"
    assert await registry.get(Placement(backend="local", workspace=None)) is first
    other = await registry.get(Placement(workspace="other"))
    assert other is not first and other.workspace == "other"
    assert isinstance(first, LocalSandbox) and first.root == (tmp_path / "workspaces" / "default").resolve()
    await registry.aclose()


async def test_isolate_gives_a_fork_its_own_copy_of_the_workspace(tmp_path: Path) -> None:
    registry = SandboxRegistry(tmp_path)
    parent_placement = Placement(workspace="main")
    parent = await registry.get(parent_placement)
    await parent.write_file("plan.md", "step 1")

    child_placement = await registry.isolate(parent_placement)
    assert child_placement.backend == "local" and child_placement.workspace != "main"
    assert child_placement.workspace is not None and child_placement.workspace.startswith("main-fork-")
    child = await registry.get(child_placement)
    assert await child.read_file("plan.md") == b"step 1"
    await child.write_file("plan.md", "step 2 (child)")
    assert await parent.read_file("plan.md") == b"step 1"

    named = await registry.isolate(parent_placement, "explicit-name")
    assert named.workspace == "explicit-name"
    with pytest.raises(SandboxError, match="already exists"):
        await registry.isolate(parent_placement, "explicit-name")
    await registry.aclose()


async def test_isolating_a_never_used_workspace_clones_it_empty(tmp_path: Path) -> None:
    registry = SandboxRegistry(tmp_path)
    child = await registry.get(await registry.isolate(Placement()))
    assert await child.list_dir(".") == []
    await registry.aclose()


async def test_bad_names_and_backends_are_clear_errors(tmp_path: Path) -> None:
    registry = SandboxRegistry(tmp_path)
    with pytest.raises(InvalidWorkspaceError, match="no '/'"):
        await registry.get(Placement(workspace="../escape"))
    with pytest.raises(SandboxError, match="unknown sandbox backend 'docker'; choose one of local, opensandbox"):
        await registry.get(Placement(backend="docker"))
    with pytest.raises(SandboxError, match="unknown sandbox backend"):
        SandboxRegistry(tmp_path, default_backend="docker")
    with pytest.raises(InvalidWorkspaceError):
        await registry.isolate(Placement(), "a/b")
    assert not (tmp_path / "escape").exists()


async def test_destroy_removes_the_workspace_and_forgets_the_sandbox(tmp_path: Path) -> None:
    registry = SandboxRegistry(tmp_path)
    placement = Placement(workspace="gone")
    sandbox = await registry.get(placement)
    await sandbox.write_file("x", "1")
    await registry.destroy(placement)
    assert not (tmp_path / "workspaces" / "gone").exists()
    again = await registry.get(placement)
    assert again is not sandbox and await again.list_dir(".") == []


async def test_a_custom_backend_can_be_registered(tmp_path: Path) -> None:
    class Scratch(LocalBackend):
        name = "scratch"

    registry = SandboxRegistry(tmp_path, use_bwrap=False)
    registry.register(Scratch(tmp_path / "scratch", use_bwrap=False))
    sandbox = await registry.get(Placement(backend="scratch", workspace="w"))
    assert (await sandbox.run_command("pwd")).stdout.strip() == str((tmp_path / "scratch" / "w").resolve())


async def test_runtime_owns_a_registry_under_its_home(home: Path) -> None:
    async with Runtime.open(home, workers=0) as rt:
        assert rt.sandboxes.default_backend == "local"
        sandbox = await rt.sandboxes.get(Placement())
        await sandbox.write_file("hello.txt", "hi")
        expected = "bubblewrap" if shutil.which("bwrap") else "none"
        assert sandbox.capabilities.isolation == expected
    assert (home / "workspaces" / "default" / "hello.txt").read_text() == "hi"


async def test_runtime_can_default_to_opensandbox(home: Path, opensandbox_domain: str) -> None:
    settings = {"domain": opensandbox_domain, "api_key": EMULATOR_API_KEY, "namespace": "rt-test"}
    async with Runtime.open(home, workers=0, sandbox="opensandbox", opensandbox=settings) as rt:
        assert rt.sandboxes.placement().backend == "opensandbox"
        sandbox = await rt.sandboxes.get(rt.sandboxes.placement("proj"))
        assert sandbox.capabilities.isolation == "container"
        assert (await sandbox.run_command("echo from-container")).stdout == "from-container\n"
        fork = await rt.sandboxes.isolate(rt.sandboxes.placement("proj"))
        assert fork.backend == "opensandbox"
        backend = rt.sandboxes.backends["opensandbox"]
        assert isinstance(backend, OpenSandboxBackend)
        for workspace in ("proj", fork.workspace):
            assert workspace is not None
            await backend.destroy(workspace)


async def test_runtime_refuses_an_unknown_default_backend(home: Path) -> None:
    with pytest.raises(SandboxError, match="unknown sandbox backend"):
        async with Runtime.open(home, workers=0, sandbox="nope"):
            pass


async def test_forking_a_session_with_isolated_workspaces_gives_each_child_its_own_copy(home: Path) -> None:
    async with Runtime.open(home, workers=0) as rt:
        parent = await rt.sessions.create([{"kind": "user", "content": "build it"}], placement=Placement(workspace="w"))
        workdir = await rt.sandboxes.get(parent.placement)
        await workdir.write_file("src/app.py", "print('v1')\n")

        placements = [await rt.sandboxes.isolate(parent.placement) for _ in range(2)]
        children = await rt.sessions.fork(parent.id, 2, placements=placements)
        boxes = [await rt.sandboxes.get(child.placement) for child in children]
        assert len({box.workspace for box in boxes} | {workdir.workspace}) == 3
        await boxes[0].write_file("src/app.py", "print('child 0')\n")
        assert (await boxes[1].run_code("print(open('src/app.py').read(), end='')")).stdout == "print('v1')\n"
        assert await workdir.read_file("src/app.py") == b"print('v1')\n"

        plain = await rt.sessions.fork(parent.id, 1)  # without isolation the child shares the workspace
        assert await rt.sandboxes.get(plain[0].placement) is workdir


async def test_concurrent_gets_of_one_workspace_open_it_once(tmp_path: Path) -> None:
    registry = SandboxRegistry(tmp_path)
    got: list[object] = []

    async def grab() -> None:
        got.append(await registry.get(Placement(workspace="busy")))

    async with anyio.create_task_group() as tg:
        for _ in range(8):
            tg.start_soon(grab)
    assert len(got) == 8 and all(g is got[0] for g in got)
    await registry.aclose()


def test_bubblewrap_is_there_when_ci_runs() -> None:
    """The bwrap-isolated backend tests skip only on a developer machine without bubblewrap: CI installs
    it (.ci/run), so there a missing bwrap is a failure, not a silent skip of the isolation tests."""
    if os.environ.get("CI") and shutil.which("bwrap") is None:
        pytest.fail("CI=true but bubblewrap is missing: .ci/run must `apt-get install bubblewrap`")
