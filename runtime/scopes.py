"""Cancel scopes made straight from the running async backend's own class.

``anyio.CancelScope(...)`` looks the backend up on every call (sniffio, the running loop, the current
task) before it makes the backend's scope; that look-up costs as much as the scope itself. A committed
step enters three scopes (the step's, its commit line's shield, the SQLite writer's shield), so the
look-up was some 5% of a no-op step's instructions (``bench.step_cpu``). The class is the same on every
call in one process (the runtime runs on asyncio), so it is asked for once, on a running loop. A module
of its own, beside ``runtime.ids``: the durable engine and the store's database modules both use it.
"""

from __future__ import annotations

import functools
import math

import anyio


@functools.cache
def _backend_class() -> type[anyio.CancelScope]:
    """The running backend's scope class (an ``anyio.CancelScope`` made once, outside any ``with``)."""
    return type(anyio.CancelScope())


def cancel_scope(*, deadline: float = math.inf, shield: bool = False) -> anyio.CancelScope:
    """What ``anyio.CancelScope(deadline=..., shield=...)`` makes, without looking the backend up again."""
    return _backend_class()(deadline=deadline, shield=shield)
