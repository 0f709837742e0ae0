"""``Migration``: one named schema change, the unit both backends' migration lists are made of.

Each backend applies its own list in order and records each name once applied (in its
``schema_migrations`` table); the SQL is the backend's, the shape is shared.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Migration:
    """One named schema change: applied once, in order, and recorded in ``schema_migrations``."""

    name: str
    sql: str


__all__ = ["Migration"]
