"""SQLite schema of each layer, one module per layer (assembled by ``runtime.store.sqlite.migrations``)."""
