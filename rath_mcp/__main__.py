"""The ``rath-mcp`` command (also ``python -m rath_mcp``): the process entry, then ``rath_mcp.cli``.

A desktop host starts the server at every launch and waits for its tool list. Loading the program
(the MCP SDK, pydantic's models, ours) allocates a few hundred thousand objects that all stay alive,
and the cyclic garbage collector would scan them again and again while they are made, finding
nothing: about 15 ms of every start. So the process runs without it until the program has loaded
(``rath_mcp.cli.loaded``), then freezes what loading made, so that no later collection scans it
either (``gc.freeze``), and collects normally from there on.
"""

import gc
import sys


def main() -> int:
    gc.disable()  # before anything heavy is imported; rath_mcp.cli.loaded turns it back on
    from rath_mcp.cli import main as run_command

    return run_command()


if __name__ == "__main__":
    sys.exit(main())
