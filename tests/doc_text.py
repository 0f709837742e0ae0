"""Reading the README and docs/ as the tests that hold them to the truth need: fenced blocks, sections, links."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def blocks(page: Path, language: str) -> list[str]:
    """The fenced code blocks of ``page`` tagged ``language`` ('' for untagged), in order."""
    found: list[str] = []
    lines: list[str] = []
    lang: str | None = None
    for line in page.read_text().splitlines(keepends=True):
        if line.startswith("```") and lang is None:
            lang, lines = line[3:].strip(), []
        elif line.startswith("```"):
            if lang == language:
                found.append("".join(lines))
            lang = None
        elif lang is not None:
            lines.append(line)
    return found


def section(page: Path, title: str) -> str:
    """The text of ``page``'s ``## title`` section, up to the next ``##`` heading."""
    text = page.read_text()
    assert f"\n## {title}\n" in text, f"{page.relative_to(ROOT)} has no section '## {title}'"
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def prose(page: Path) -> str:
    """``page`` without its fenced blocks (a link inside code is not a link)."""
    return re.sub(r"^```.*?^```[^\n]*$", "", page.read_text(), flags=re.MULTILINE | re.DOTALL)


def links(page: Path) -> list[str]:
    """The targets of the Markdown links and images in ``page``'s prose."""
    return re.findall(r"!?\[[^\]]*\]\(([^)\s]+)\)", prose(page))


def anchors(page: Path) -> set[str]:
    """The anchors GitHub makes of ``page``'s headings: lower case, punctuation dropped, spaces to '-'."""
    titles = re.findall(r"^#{1,6} (.+)$", prose(page), re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-") for title in titles}
