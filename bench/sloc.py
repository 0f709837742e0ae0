"""Count code lines: the measure of issue 26's "store code <= 4,500 lines".

A code line is a physical line holding at least one token that is not a comment, a newline or an
indentation change, and that is not part of a docstring (the first statement of a module, class
or function when it is a string). Blank lines, comment lines and docstrings are not counted, so
neither cramming code onto fewer lines nor deleting explanations changes the figure the wrong way:
a line counts once however many tokens it holds, and explanation never counts.

    .venv/bin/python -m bench.sloc                      # runtime/store, the issue's measure
    .venv/bin/python -m bench.sloc runtime/durable x.py # any files or directories

Prints one line per file (code lines, path) and the total last.
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from pathlib import Path

_NOT_CODE = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENDMARKER,
}


def docstring_lines(tree: ast.Module) -> set[int]:
    """The line numbers of every docstring in ``tree``."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                lines.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return lines


def code_lines(source: str) -> int:
    """How many lines of ``source`` (Python) are code, as the module docstring defines it."""
    docs = docstring_lines(ast.parse(source))
    code: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in _NOT_CODE:
            code.update(n for n in range(token.start[0], token.end[0] + 1) if n not in docs)
    return len(code)


def python_files(args: list[str]) -> list[Path]:
    paths = [Path(a) for a in args] or [Path("runtime/store")]
    return sorted(f for p in paths for f in (p.rglob("*.py") if p.is_dir() else [p]))


def main(args: list[str]) -> int:
    total = 0
    for path in python_files(args):
        n = code_lines(path.read_text())
        total += n
        print(f"{n:6d} {path}")
    print(f"{total:6d} total")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
