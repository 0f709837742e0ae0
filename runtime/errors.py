"""The one exception tree of the runtime.

::

    RathError                      root: catch this to catch everything the runtime raises
    ├── UsageError                 bad input; the message says what was wrong and how to fix it
    │   ├── NotFoundError          an id or URI that does not exist (in this tenant/project)
    │   ├── InvalidInputError      malformed arguments, JSONL, schemas, workflow definitions
    │   └── ConflictError          the input contradicts what is stored (idempotency key reuse, ...)
    ├── RunFailure                 a run or step failed; carries run_id and step
    ├── StoreError                 the store could not do what was asked
    │   ├── StoreUnavailableError  the store could not be reached; nothing was written: try again later
    │   ├── CommitUnknownError     the store was lost during a commit and could not say whether it happened
    │   ├── StoreDamagedError      its file is damaged, or no longer the file opened: no more writes
    │   └── LeaseLostError         a worker's fencing token is stale: it may not commit
    └── ControlSignal              control flow, not failure; never shown to users as an error
        └── InterruptRaised        a step parked the run on a human interrupt

Errors are translated once, at the boundary (``rath_mcp.errors`` for MCP, the CLI for the shell).
"""

from __future__ import annotations


class RathError(Exception):
    """Root of every exception the runtime raises on purpose."""


class UsageError(RathError):
    """The caller's input was wrong. The message says what, and how to fix it."""


class NotFoundError(UsageError):
    """An id or URI that does not exist here."""


class InvalidInputError(UsageError):
    """Malformed input: arguments, JSONL, schemas, workflow definitions."""


class ConflictError(UsageError):
    """The input contradicts what is already stored."""


class RunFailure(RathError):
    """A run (or one of its steps) failed."""

    def __init__(self, message: str, *, run_id: str | None = None, step: str | None = None) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.step = step


class StoreError(RathError):
    """The store could not carry out the request."""


class StoreUnavailableError(StoreError):
    """The store could not be reached (a server down or restarting), and nothing was written: the same
    call may be made again once it is back. (A write that may have been applied is never this error.)"""


class CommitUnknownError(StoreError):
    """The store was lost while a commit was on its way, and could not be asked whether it happened: the
    write may or may not be there. Never retried blindly: find out from the data (a fencing token, an
    idempotency key) before doing it again."""


class StoreDamagedError(StoreError):
    """The store's file is damaged, or its path no longer names the file this process opened (deleted,
    moved, replaced): once seen, the store refuses every further write (a write would be lost)."""


class SchemaBehindError(StoreError):
    """The store's schema needs migrations this process may not run (``rath-mcp migrate`` does; CLI exit 2)."""


class LeaseLostError(StoreError):
    """A worker tried to commit with a fencing token that is no longer current."""

    def __init__(self, run_id: str, token: int) -> None:
        super().__init__(f"lease on run {run_id} lost: fencing token {token} is stale; the commit was refused")
        self.run_id = run_id
        self.token = token


class ControlSignal(RathError):
    """Control flow carried as an exception; not a failure."""


class InterruptRaised(ControlSignal):
    """A step parked its run on a human interrupt."""

    def __init__(self, interrupt_id: str) -> None:
        super().__init__(f"run parked on interrupt {interrupt_id}")
        self.interrupt_id = interrupt_id
