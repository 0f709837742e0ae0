"""What a server start loads, and what it leaves for later (issue 14: "import what a configuration
needs, when it needs it"). Speed itself is measured by ``bench/startup.py``; these pin the behaviour
that makes it fast: lazy package namespaces, no agent stack or vendor SDK at start, and the garbage
collector left off only while the program loads."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.lazy import read_exports

LAZY_PACKAGES = [
    "rath_mcp",
    "runtime",
    "runtime.durable",
    "runtime.flow",
    "runtime.sandbox",
    "runtime.providers",
    "runtime.sessions",
    "runtime.memory",
    "runtime.access",
    "runtime.artifacts",
]

# Loaded by the steps, commands and transports that use them, never by a stdio server's start.
NOT_AT_START = [
    "runtime.artifacts.s3",
    "runtime.flow.agent",
    "runtime.flow.tools",
    "runtime.flow.mcp_tools",
    "runtime.flow.selector",
    "runtime.providers.openai_provider",
    "runtime.providers.anthropic_provider",
    "runtime.sandbox.opensandbox",
    "rath_mcp.auth.gate",
    "rath_mcp.auth.oauth",
    "runtime.access.tokens",
    "opensandbox",
    "openai",
    "anthropic",
    "jwt",
    "jsonschema",
    "prometheus_client",
    "runtime.telemetry.otel",  # tracing: only where OTEL_EXPORTER_OTLP_ENDPOINT asks for it
    "opentelemetry.sdk",
]

START_A_SERVER = """
import json, sys, anyio
import rath_mcp.cli
from rath_mcp.server import build_server
from runtime import Runtime

async def main():
    async with Runtime.open(sys.argv[1], workers=1) as rt:
        server = build_server(rt)
        tools = len(server._tool_manager.list_tools())
    print(json.dumps({"tools": tools, "modules": sorted(sys.modules)}))

anyio.run(main)
"""


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_every_public_name_of_a_lazy_package_resolves_to_its_module_s_object(package: str) -> None:
    """The package's ``TYPE_CHECKING`` imports are its one list of public names (``runtime.lazy``)."""
    module = importlib.import_module(package)
    exports = read_exports(module.__file__)
    assert exports
    assert sorted(module.__all__) == sorted(exports)
    for name in module.__all__:
        value = getattr(module, name)
        assert value is getattr(importlib.import_module(exports[name]), name), name
    with pytest.raises(AttributeError, match=f"module '{package}' has no attribute 'no_such_name'"):
        module.no_such_name  # noqa: B018


def test_dir_lists_a_lazy_package_s_names_before_any_is_loaded() -> None:
    probe = "import json, sys, runtime\nprint(json.dumps([sorted(dir(runtime)), 'runtime.flow.agent' in sys.modules]))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    names, agent_loaded = json.loads(done.stdout)
    assert {"Agent", "Runtime", "step", "__all__", "__getattr__"} <= set(names)
    assert not agent_loaded


def test_a_lazy_package_s_type_checking_block_holds_only_its_public_imports(tmp_path: Path) -> None:
    init = tmp_path / "__init__.py"
    init.write_text("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    import json\n")
    with pytest.raises(ValueError, match=r"__init__.py:4: the TYPE_CHECKING block of a lazy package holds only"):
        read_exports(str(init))


def test_a_server_start_loads_no_agent_stack_vendor_sdk_or_http_only_module(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", START_A_SERVER, str(tmp_path / "home")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["tools"] == 37
    loaded = set(report["modules"])
    assert "runtime.durable.runner" in loaded  # the check can fail: the store and the engine are there
    assert sorted(loaded & set(NOT_AT_START)) == []


def test_the_agent_workflow_loads_the_agent_stack_when_its_step_needs_it() -> None:
    probe = (
        "import json, sys\n"
        "from runtime.workflows import builtin_workflows\n"
        "names = sorted(w.name for w in builtin_workflows())\n"
        "before = 'runtime.flow.agent' in sys.modules\n"
        "import runtime\n"
        "print(json.dumps([names, before, runtime.Agent.__module__]))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    names, loaded_before, agent_module = json.loads(done.stdout)
    assert {"agent", "team"} <= set(names)
    assert (loaded_before, agent_module) == (False, "runtime.flow.agent")


GC_PROBE = """
import gc, sys
from rath_mcp.cli import loaded
gc.disable() if sys.argv[1] == "off" else None
loaded()
print(gc.isenabled(), gc.get_freeze_count() > 0)
"""


@pytest.mark.parametrize(("collector", "expected"), [("off", "True True"), ("on", "True False")])
def test_loaded_turns_the_collector_back_on_and_freezes_only_where_the_entry_turned_it_off(
    collector: str, expected: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", GC_PROBE, collector], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == expected


def test_the_command_runs_with_the_collector_back_on(tmp_path: Path) -> None:
    """``python -m rath_mcp`` (the process entry) turns the collector off to load, and on again."""
    probe = (
        "import gc, runpy, sys\n"
        "import rath_mcp.cli as cli\n"
        "real = cli._dispatch\n"
        "async def spy(args):\n"
        "    code = await real(args)\n"
        "    print('collector on:', gc.isenabled(), file=sys.stderr)\n"
        "    return code\n"
        "cli._dispatch = spy\n"
        "sys.argv = ['rath-mcp', 'migrate', '--home', sys.argv[1]]\n"
        "runpy.run_module('rath_mcp', run_name='__main__')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path / "home")], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "collector on: True" in done.stderr
