"""Sandboxes: where tools run. One ``Backend`` protocol; ``local`` and ``opensandbox`` backends."""

from runtime.sandbox.base import (
    Backend,
    BackendUnavailableError,
    Capabilities,
    CommandResult,
    FileEntry,
    InvalidWorkspaceError,
    NotAFileError,
    PathEscapeError,
    Sandbox,
    SandboxError,
    SandboxFileNotFoundError,
    UnsupportedLanguageError,
    check_workspace_name,
)

__all__ = [
    "Backend",
    "BackendUnavailableError",
    "Capabilities",
    "CommandResult",
    "FileEntry",
    "InvalidWorkspaceError",
    "NotAFileError",
    "PathEscapeError",
    "Sandbox",
    "SandboxError",
    "SandboxFileNotFoundError",
    "UnsupportedLanguageError",
    "check_workspace_name",
]
