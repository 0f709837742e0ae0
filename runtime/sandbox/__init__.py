"""Sandboxes: where tools run. One ``Backend`` protocol; ``local`` and ``opensandbox`` backends.

``SandboxRegistry`` (``rt.sandboxes``) maps a session's placement to an opened ``Sandbox``.
"""

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
from runtime.sandbox.opensandbox import OpenSandboxBackend, OpenSandboxSettings
from runtime.sandbox.opensandbox_box import OpenSandboxSandbox
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
