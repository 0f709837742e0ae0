"""The docs say what is true.

- Every ``sh`` block of docs/getting-started.md runs as written, in order, as real processes in the
  checkout with ``.venv/bin`` first on PATH and a fresh ``RATH_HOME`` (and ``HOME``) in a temporary
  directory, and exits 0; the README's own ``sh`` lines are among them.
- Every relative link and image in the README and docs/ points at a file that exists, and an
  ``#anchor`` at a heading of that file.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.doc_text import DOCS, README, ROOT, anchors, blocks, links

GETTING_STARTED = DOCS / "getting-started.md"
PAGES = [README, *sorted(DOCS.glob("*.md"))]


def test_getting_started_runs_as_written_on_a_fresh_home(tmp_path: Path) -> None:
    home, user = tmp_path / "rath", tmp_path / "user"
    user.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RATH_")}
    env |= {"RATH_HOME": str(home), "HOME": str(user), "PATH": f"{ROOT / '.venv' / 'bin'}:{env.get('PATH', '')}"}
    shell = blocks(GETTING_STARTED, "sh")
    assert len(shell) >= 4, "getting started lost its tour"
    for block in shell:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, (
            f"exit {done.returncode} from\n{block}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        )
    assert (home / "rath.db").is_file(), "the tour keeps its state in RATH_HOME"
    assert (user / "rath-backups" / "rath.db").is_file(), "the tour's backup is where it says"


def test_the_readme_shell_lines_are_run_by_getting_started() -> None:
    run = {line for block in blocks(GETTING_STARTED, "sh") for line in block.splitlines()}
    for block in blocks(README, "sh"):
        for line in block.splitlines():
            assert line in run, f"README line not in a getting-started sh block (so run by no test): {line}"


def test_every_relative_link_points_at_a_file_and_heading_that_exist() -> None:
    broken: list[str] = []
    for page in PAGES:
        for target in links(page):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in anchors(file):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)
