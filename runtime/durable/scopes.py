"""Cancel scopes made straight from the running async backend's own class.

``anyio.CancelScope(...)`` looks the backend up on every call (sniffio, the running loop, the current
task) before it makes the backend's scope; that look-up costs as much as the scope itself. A committed
step enters three scopes (the step's, its commit line's shield, the writer's shield), so the look-up
was some 5% of a no-op step's instructions. The class is the same on every call in one process (the
runtime runs on asyncio), so it is looked up once, at the first scope made on a running loop.
"""

from __future__ import annotations

import math

import anyio

_scope_class: type[anyio.CancelScope] | None = None


def cancel_scope(*, deadline: float = math.inf, shield: bool = False) -> anyio.CancelScope:
    """What ``anyio.CancelScope(deadline=..., shield=...)`` makes, without looking the backend up again."""
    global _scope_class
    cls = _scope_class
    if cls is None:
        cls = _scope_class = type(anyio.CancelScope())
    return cls(deadline=deadline, shield=shield)
