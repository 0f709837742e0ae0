"""Tables of the memory layer."""

from runtime.store.sqlite import Migration

MIGRATIONS: list[Migration] = []
