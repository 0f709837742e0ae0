"""Tables of the durable layer (runs, events, checkpoints, leases, effects, interrupts)."""

from runtime.store.sqlite import Migration

MIGRATIONS: list[Migration] = []
