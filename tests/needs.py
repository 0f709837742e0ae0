"""What a test needs from the machine (bubblewrap, PostgreSQL, chromium, node), one rule for all of it.

On a developer's machine a test whose need is not met skips, saying what is missing and how to get
it. Under CI (``.ci/run`` sets ``CI=true`` after installing and starting everything) it fails
instead: a skipped test there would hide a feature that was never exercised.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def unavailable(what: str, how: str) -> NoReturn:
    """Skip (developer machine) or fail (CI): ``what`` is not there; ``how`` says how to get it."""
    if os.environ.get("CI"):
        pytest.fail(f"CI is set but {what} is not available: .ci/run must provide it ({how})")
    pytest.skip(f"{what} is not available ({how}); under CI this test fails instead of skipping")


def require_root(case: str) -> None:
    """Tests of what a root server does (``case``) need root: they skip elsewhere and fail under CI."""
    if os.geteuid() != 0:
        unavailable(f"root ({case})", "run the tests as root, as CI does")
