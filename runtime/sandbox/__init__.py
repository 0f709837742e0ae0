"""Sandboxes: where tools run. One ``Backend`` protocol; ``local`` and ``opensandbox`` backends.

``SandboxRegistry`` (``rt.sandboxes``) maps a session's placement to an opened ``Sandbox``.
``OpenSandboxBackend`` and ``OpenSandboxSandbox`` are imported on first use (the SDK is slow to load).
"""

from typing import Any

from runtime.sandbox.base import (
    Backend,
    BackendUnavailableError,
    Capabilities,
    CommandResult,
    FileEntry,
    FileTooLargeError,
    InvalidWorkspaceError,
    IsolationUnavailableError,
    NotAFileError,
    PathEscapeError,
    Sandbox,
    SandboxError,
    SandboxFileNotFoundError,
    UnsupportedLanguageError,
    WorkspaceFullError,
    check_workspace_name,
)
from runtime.sandbox.local import LocalBackend, LocalSandbox
from runtime.sandbox.opensandbox_settings import OpenSandboxSettings
from runtime.sandbox.policy import SandboxPolicy, ToolLimits
from runtime.sandbox.registry import SandboxRegistry
from runtime.sandbox.workspaces import WorkspaceExistsError

__all__ = [
    "Backend",
    "BackendUnavailableError",
    "Capabilities",
    "CommandResult",
    "FileEntry",
    "FileTooLargeError",
    "InvalidWorkspaceError",
    "IsolationUnavailableError",
    "LocalBackend",
    "LocalSandbox",
    "NotAFileError",
    "OpenSandboxBackend",
    "OpenSandboxSandbox",
    "OpenSandboxSettings",
    "PathEscapeError",
    "Sandbox",
    "SandboxError",
    "SandboxFileNotFoundError",
    "SandboxPolicy",
    "SandboxRegistry",
    "ToolLimits",
    "UnsupportedLanguageError",
    "WorkspaceExistsError",
    "WorkspaceFullError",
    "check_workspace_name",
]


def __getattr__(name: str) -> Any:
    if name == "OpenSandboxBackend":
        from runtime.sandbox.opensandbox import OpenSandboxBackend

        return OpenSandboxBackend
    if name == "OpenSandboxSandbox":
        from runtime.sandbox.opensandbox_box import OpenSandboxSandbox

        return OpenSandboxSandbox
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
