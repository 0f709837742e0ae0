"""Every file in ``examples/`` runs as a user would run it, and prints what its docstring promises.

Each example is a real subprocess (``sys.executable examples/<file>``) with its own temporary
``RATH_HOME`` and the repository root as working directory, so the snippets of the README and docs/
cannot rot.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from rath_mcp.cli import build_parser
from rath_mcp.server import build_server
from runtime import Runtime
from tests.doc_text import DOCS, README, blocks, section

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def run_example(name: str, home: Path, *args: str, timeout: float = 60) -> str:
    """Run ``examples/<name>`` to completion; fail with its stderr unless it exits 0."""
    env = {**os.environ, "RATH_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, f"{name} exited {done.returncode}:\n{done.stdout}\n{done.stderr[-3000:]}"
    assert not done.stderr.strip() or "Traceback" not in done.stderr, done.stderr
    return done.stdout


def test_every_example_has_a_test_and_a_docstring() -> None:
    tested = set(re.findall(r'run_example\("([\w.]+)"', Path(__file__).read_text()))
    for path in EXAMPLES.glob("*.py"):
        assert path.name in tested or path.name in HELPER_FILES, f"examples/{path.name} is run by no test"
        assert path.read_text().lstrip().startswith('"""'), f"examples/{path.name} needs a docstring"


def test_sessions_fork_merge_keeps_shared_history_once(home: Path) -> None:
    out = run_example("sessions_fork_merge.py", home)
    assert re.search(r"created ses_\w+ with 2 chunks", out)
    merged = re.search(r"merged into (ses_\w+) \(merge, parents (ses_\w+), (ses_\w+)\)", out)
    assert merged, out
    transcript = re.findall(r"^\s+(\w+): (.*)$", out, re.MULTILINE)
    assert transcript == [
        ("system", "You are a careful planner."),
        ("user", "Plan a picnic."),
        ("assistant", "Option A: the park."),
        ("assistant", "Option B: the beach."),
    ]
    assert "lineage: 6 nodes, 6 edges" in out
    assert f"style {merged.group(1)} stroke-width:3px" in out
    assert (home / "rath.db").is_file()


def test_artifacts_keeps_files_and_one_copy_of_the_same_bytes(home: Path) -> None:
    out = run_example("artifacts.py", home)
    assert re.search(r"saved table.csv \(8 bytes, text/csv\) and report.md as rath://artifacts/art_\w+", out), out
    assert "read back report.md: '# Report'" in out and "the session had 2 artifact(s)" in out
    assert "share one copy: True" in out


def test_memory_recall_finds_only_matching_items(home: Path) -> None:
    out = run_example("memory_recall.py", home)
    assert re.search(r"recall 'which database does staging use': 1 hit\(s\)\n\s+[\d.]+\s+memory://resources/", out)
    assert "memory://agent/ops/deploys  Deploys happen on Tuesdays" in out
    assert "recall 'favourite colour': 0 hit(s)" in out
    committed = re.search(r"committed (ses_\w+): transcript at memory://session/\1/transcript, (\d+) extracted", out)
    assert committed and int(committed.group(2)) >= 1, out
    assert re.search(rf"'tabs or spaces' finds memory://session/{committed.group(1)}/", out)


def test_durable_run_survives_a_restart_and_resumes_after_approval(home: Path) -> None:
    out = run_example("durable_approval.py", home)
    waiting = re.search(
        r"run (run_\w+) is waiting at step publish: approval \"Publish 'Note: picnic on Saturday'\?\"", out
    )
    assert waiting, out
    assert "after approval the run is succeeded: published=True" in out
    assert "receipt: {'posted': 'Note: picnic on Saturday'}" in out
    events = out.split("events: ")[1].split(", ")
    assert events[0] == "run.created" and "interrupt.created" in events and "interrupt.decided" in events
    # once each: the publish effect, and the question and decision written into the run's session
    assert events.count("effect.succeeded") == 2, "the publish effect must happen exactly once"


def test_agent_runs_tools_in_its_sandbox_and_cannot_leave_it(home: Path) -> None:
    out = run_example("agent_sandbox.py", home)
    assert re.search(r"run run_\w+: succeeded", out), out
    assert "tool_result: wrote 11 bytes to todo.txt" in out
    assert '"exit_code": 0, "stdout": "2\\n"' in out, "wc -l really ran in the workspace"
    assert "leaves the workspace" in out
    assert "assistant: todo.txt is written and has 2 items." in out
    assert (home / "workspaces" / "default" / "todo.txt").read_text() == "bread\nmilk\n"
    assert not list(home.parent.glob("todo.txt")), "nothing is written outside the home"
    usage = re.search(r"usage: (\d+) tokens", out)
    assert usage and int(usage.group(1)) > 0, out


def test_mcp_client_drives_custom_workflows_over_stdio(home: Path) -> None:
    out = run_example("mcp_client.py", home)
    workflows = re.search(r"connected \(([\d-]+)\); workflows: (.*)", out)
    assert workflows, out
    assert {"publish", "triage", "echo", "approval"} <= set(workflows.group(2).split(", "))
    assert "triage 'Urgent: the site is down': succeeded via route -> escalate" in out
    assert "triage 'Typo on the About page': succeeded via route -> queue" in out
    assert "publish is waiting: Publish 'Note: picnic'?" in out
    assert "publish after approval: succeeded" in out
    assert "recall 'when is the picnic': The picnic is on Saturday in the park." in out


def test_a_failed_run_forked_with_a_patch_finishes_without_building_again(home: Path) -> None:
    out = run_example("fork_run.py", home)
    failed = re.search(r"run (run_\w+) failed: step 'deploy' failed after 1 attempt\(s\): no target", out)
    assert failed, out
    assert re.search(r"checkpoint \d+: next step deploy", out)
    assert "succeeded: result {'artifact': 'app-1.2.tar', 'deployed_to': 'staging'}" in out
    assert f"forked_from {{'run_id': '{failed.group(1)}', 'checkpoint_seq'" in out
    assert f"builds done: 1 (in {failed.group(1)})" in out


def test_webhooks_notifies_a_receiver_that_checks_signatures(home: Path) -> None:
    out = run_example("webhooks.py", home)
    notified = re.findall(r"^notified: (msg_\w+) (run\.\w+) (run_\w+)$", out, re.MULTILINE)
    assert [kind for _, kind, _ in notified] == ["run.waiting", "run.succeeded"], out
    assert notified[0][0] != notified[1][0] and notified[0][2] == notified[1][2]
    assert "a forged notification is answered 401" in out


# my_workflows.py is the --workflows file: mcp_client.py serves it and durable_approval.py imports it.
HELPER_FILES: set[str] = {"my_workflows.py"}


# -- the README and docs/: commands, snippets and tables are checked against what really exists -----

GETTING_STARTED, PROTOCOL = DOCS / "getting-started.md", DOCS / "protocol.md"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
NEWCOMER_COMMANDS = "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/rath-mcp demo\nbash .ci/run\n"


def test_readme_starts_with_the_two_newcomer_commands() -> None:
    text = README.read_text()
    first_block = text.split("```\n", 2)[1]
    assert text.startswith("# rath-mcp\n") and first_block == NEWCOMER_COMMANDS


def test_the_command_list_is_real_cli_commands() -> None:
    block = section(GETTING_STARTED, "Commands").split("```\n")[1]
    parser = build_parser()
    for line in block.splitlines():
        argv = shlex.split(line.split("#")[0].replace("…", "0" * 24))
        assert argv[0] == "rath-mcp", line
        parser.parse_args(argv[1:])  # argparse exits (failing the test) on an unknown command or option


def test_every_rath_mcp_line_in_the_docs_is_a_real_cli_command() -> None:
    parser = build_parser()
    for page in PAGES:
        for block in [*blocks(page, ""), *blocks(page, "sh")]:
            for line in block.replace("\\\n", " ").splitlines():
                if line.startswith("rath-mcp "):
                    argv = shlex.split(line.split(" #")[0].replace("…", "0" * 24))
                    parser.parse_args(argv[1:])  # exits, failing the test, on an unknown command or option


def test_python_snippets_of_the_readme_and_docs_are_example_files() -> None:
    sources = [p.read_text() for p in EXAMPLES.glob("*.py")]
    snippets = [snippet for page in PAGES for snippet in blocks(page, "python")]
    assert snippets, "the docs show no Python"
    for snippet in snippets:
        for paragraph in snippet.split("\n\n\n"):
            assert any(paragraph.strip() in source for source in sources), f"in no examples/ file:\n{paragraph}"


def test_protocol_tables_list_exactly_the_servers_tools_and_resources(home: Path) -> None:
    listed = anyio.run(list_server_surface, home)
    rows = re.findall(r"^\| `(\w+)`(?: / `(\w+)`)? \|", section(PROTOCOL, "Tools"), re.MULTILINE)
    documented = {name for pair in rows for name in pair if name}
    missing, extra = listed["tools"] - documented, documented - listed["tools"]
    assert not missing and not extra, f"docs/protocol.md tools: missing {sorted(missing)}, not served {sorted(extra)}"
    listing = section(PROTOCOL, "Resources and prompts")
    uris = set(re.findall(r"`((?:rath|ui)://[^`]+)`", listing))
    assert uris == listed["resources"], (
        f"docs/protocol.md resources: missing {listed['resources'] - uris}, extra {uris - listed['resources']}"
    )
    prompts = set(re.findall(r"`(\w+)`", listing.split("Prompts:", 1)[1]))
    assert prompts == listed["prompts"], (
        f"docs/protocol.md prompts {sorted(prompts)} but the server has {sorted(listed['prompts'])}"
    )


async def list_server_surface(home: Path) -> dict[str, set[str]]:
    async with Runtime.open(home) as rt, Client(build_server(rt)) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
        resources = {str(r.uri) for r in (await client.list_resources()).resources}
        prompts = {p.name for p in (await client.list_prompts()).prompts}
    return {"tools": tools, "resources": templates | resources, "prompts": prompts}


HOSTS = ("vscode", "claude-code", "claude-desktop")


def client_configs(home: Path) -> dict[str, tuple[str, list[str]]]:
    """(command, args) of each README client snippet as its host would run it.

    Each host gets its own stand-in directory under ``home`` (the VS Code workspace folder, or
    $HOME for the other two), so the test can tell that every snippet keeps state where it says.
    """
    vscode = json.loads(blocks(README, "json")[0])["servers"]["rath"]
    vscode_args = [a.replace("${workspaceFolder}", str(home / "vscode")) for a in vscode["args"]]
    (claude_code,) = [line for line in blocks(README, "") if line.startswith("claude mcp add")]
    printer = next(b for b in blocks(README, "") if "mcpServers" in b)
    desktop_home = home / "claude-desktop"
    env = {**os.environ, "HOME": str(desktop_home)}
    printed = subprocess.run(["bash", "-c", printer], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    shown = blocks(README, "json")[1].replace("/home/me/rath-mcp", str(ROOT)).replace("/home/me", str(desktop_home))
    assert printed.stdout == shown, "the README shows what the Claude Desktop one-liner prints"
    desktop = json.loads(printed.stdout)["mcpServers"]["rath"]
    claude_code_shell = f"cd {ROOT} && export HOME={home / 'claude-code'} && exec {claude_code.split(' -- ', 1)[1]}"
    return {
        "vscode": (vscode["command"].replace("${workspaceFolder}", str(ROOT)), vscode_args),
        "claude-code": ("bash", ["-c", claude_code_shell]),
        "claude-desktop": (desktop["command"], desktop["args"]),
    }


def test_readme_client_configs_start_a_working_server(home: Path) -> None:
    assert (ROOT / ".venv" / "bin" / "rath-mcp").exists(), "the README snippets expect .venv in the checkout"
    tools = anyio.run(tools_of_each_config, client_configs(home))
    assert set(tools) == set(HOSTS)
    for host in HOSTS:
        assert "session_create" in tools[host], f"{host}: {tools[host]}"
        assert (home / host / ".rath" / "rath.db").is_file(), f"{host}: state is not where the snippet says"


async def tools_of_each_config(configs: dict[str, tuple[str, list[str]]]) -> dict[str, set[str]]:
    """Start every configured server at once over stdio and list its tools."""
    found: dict[str, set[str]] = {}

    async def connect(host: str, command: str, args: list[str]) -> None:
        async with Client(StdioServerParameters(command=command, args=args)) as client:
            found[host] = {t.name for t in (await client.list_tools()).tools}

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for host, (command, args) in configs.items():
                tg.start_soon(connect, host, command, args)
    return found
