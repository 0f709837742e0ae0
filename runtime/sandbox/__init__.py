"""Sandboxes: where tools run. One ``Backend`` protocol; ``local`` and ``opensandbox`` backends.

``SandboxRegistry`` (``rt.sandboxes``) maps a session's placement to an opened ``Sandbox``.
Every name is imported on first use (``runtime.lazy``): ``OpenSandboxBackend`` and
``OpenSandboxSandbox`` most of all, since the OpenSandbox SDK is slow to load.
"""

from typing import TYPE_CHECKING

from runtime.lazy import lazy_exports

if TYPE_CHECKING:
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
    from runtime.sandbox.opensandbox import OpenSandboxBackend
    from runtime.sandbox.opensandbox_box import OpenSandboxSandbox
    from runtime.sandbox.opensandbox_settings import OpenSandboxSettings
    from runtime.sandbox.policy import SandboxPolicy, ToolLimits
    from runtime.sandbox.registry import SandboxRegistry
    from runtime.sandbox.workspaces import WorkspaceExistsError

_EXPORTS = {
    "Backend": "runtime.sandbox.base",
    "BackendUnavailableError": "runtime.sandbox.base",
    "Capabilities": "runtime.sandbox.base",
    "CommandResult": "runtime.sandbox.base",
    "FileEntry": "runtime.sandbox.base",
    "FileTooLargeError": "runtime.sandbox.base",
    "InvalidWorkspaceError": "runtime.sandbox.base",
    "IsolationUnavailableError": "runtime.sandbox.base",
    "LocalBackend": "runtime.sandbox.local",
    "LocalSandbox": "runtime.sandbox.local",
    "NotAFileError": "runtime.sandbox.base",
    "OpenSandboxBackend": "runtime.sandbox.opensandbox",
    "OpenSandboxSandbox": "runtime.sandbox.opensandbox_box",
    "OpenSandboxSettings": "runtime.sandbox.opensandbox_settings",
    "PathEscapeError": "runtime.sandbox.base",
    "Sandbox": "runtime.sandbox.base",
    "SandboxError": "runtime.sandbox.base",
    "SandboxFileNotFoundError": "runtime.sandbox.base",
    "SandboxPolicy": "runtime.sandbox.policy",
    "SandboxRegistry": "runtime.sandbox.registry",
    "ToolLimits": "runtime.sandbox.policy",
    "UnsupportedLanguageError": "runtime.sandbox.base",
    "WorkspaceExistsError": "runtime.sandbox.workspaces",
    "WorkspaceFullError": "runtime.sandbox.base",
    "check_workspace_name": "runtime.sandbox.base",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)

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
