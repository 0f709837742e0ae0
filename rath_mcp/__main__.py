"""``python -m rath_mcp`` is the ``rath-mcp`` command."""

import sys

from rath_mcp.cli import main

sys.exit(main())
