"""What ``rath-mcp`` says about a command line it cannot run: the commands, and the option meant.

argparse alone answers a bare ``rath-mcp`` with "the following arguments are required: COMMAND"
and a mistyped option (``serve --prot 8765``) with "unrecognized arguments", pointing at the
top-level help either way. Here a bare ``rath-mcp`` lists the commands, one line each, and an
unknown option names the closest option of the command it was given to, and that command's help.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Sequence
from typing import NoReturn

EXIT_USAGE = 2


def parse_command_line(parser: argparse.ArgumentParser, argv: Sequence[str] | None = None) -> argparse.Namespace:
    """``parser.parse_args(argv)``, with the two messages above; usage errors exit 2 (argparse's way)."""
    given = list(sys.argv[1:] if argv is None else argv)
    if not given:
        no_command(parser)
    args, extras = parser.parse_known_args(given)
    if extras:
        unrecognized(chosen_parser(parser, args), extras)
    return args


def no_command(parser: argparse.ArgumentParser) -> NoReturn:
    """The commands, one line each, then the one error line (stderr; exit 2)."""
    lines = [f"usage: {parser.prog} COMMAND [OPTIONS]   ({parser.prog} COMMAND --help: that command's options)"]
    lines.append("commands:")
    choices = _subcommands(parser)
    if choices is not None:
        width = max(len(action.dest) for action in choices._choices_actions)
        lines += [f"  {action.dest.ljust(width)}  {action.help or ''}" for action in choices._choices_actions]
    lines.append(
        f"{parser.prog}: error: no command given: choose one of the commands above (see `{parser.prog} --help`)"
    )
    parser.exit(EXIT_USAGE, "\n".join(lines) + "\n")


def unrecognized(parser: argparse.ArgumentParser, extras: list[str]) -> NoReturn:
    """One line: what was not understood, the option probably meant, and this command's help."""
    known = [option for action in parser._actions for option in action.option_strings if option.startswith("--")]
    guesses: list[str] = []
    for word in extras:
        if word.startswith("-"):
            guesses += difflib.get_close_matches(word.split("=", 1)[0], known, n=1, cutoff=0.6)
    meant = f"; did you mean {', '.join(dict.fromkeys(guesses))}?" if guesses else ""
    what = "argument" if len(extras) == 1 else "arguments"
    parser.exit(
        EXIT_USAGE,
        f"{parser.prog}: error: unrecognized {what}: {' '.join(extras)}{meant} (see `{parser.prog} --help`)\n",
    )


def chosen_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)parser of the command ``args`` holds (``rath-mcp runs list``'s, say), else ``parser``."""
    while (choices := _subcommands(parser)) is not None:
        name = getattr(args, choices.dest, None)
        if not isinstance(name, str) or name not in choices.choices:
            break
        parser = choices.choices[name]
    return parser


def _subcommands(parser: argparse.ArgumentParser) -> argparse._SubParsersAction[argparse.ArgumentParser] | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None
