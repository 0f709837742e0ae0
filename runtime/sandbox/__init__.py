"""Sandboxes: where tools run. One ``Backend`` protocol; ``local`` and ``opensandbox`` backends.

``SandboxRegistry`` (``rt.sandboxes``) maps a session's placement to an opened ``Sandbox``.
Every name is imported on first use (``runtime.lazy``): ``OpenSandboxBackend`` and
``OpenSandboxSandbox`` most of all, since the OpenSandbox SDK is slow to load.
"""

from typing import TYPE_CHECKING

from runtime.lazy import lazy_namespace

if TYPE_CHECKING:  # the public names, one import each: lazy_namespace reads them (see runtime.lazy)
    from runtime.sandbox.base import Backend as Backend
    from runtime.sandbox.base import BackendUnavailableError as BackendUnavailableError
    from runtime.sandbox.base import Capabilities as Capabilities
    from runtime.sandbox.base import CommandResult as CommandResult
    from runtime.sandbox.base import FileEntry as FileEntry
    from runtime.sandbox.base import FileTooLargeError as FileTooLargeError
    from runtime.sandbox.base import InvalidWorkspaceError as InvalidWorkspaceError
    from runtime.sandbox.base import IsolationUnavailableError as IsolationUnavailableError
    from runtime.sandbox.base import NotAFileError as NotAFileError
    from runtime.sandbox.base import PathEscapeError as PathEscapeError
    from runtime.sandbox.base import Sandbox as Sandbox
    from runtime.sandbox.base import SandboxError as SandboxError
    from runtime.sandbox.base import SandboxFileNotFoundError as SandboxFileNotFoundError
    from runtime.sandbox.base import UnsupportedLanguageError as UnsupportedLanguageError
    from runtime.sandbox.base import WorkspaceFullError as WorkspaceFullError
    from runtime.sandbox.base import check_workspace_name as check_workspace_name
    from runtime.sandbox.local import LocalBackend as LocalBackend
    from runtime.sandbox.local import LocalSandbox as LocalSandbox
    from runtime.sandbox.opensandbox import OpenSandboxBackend as OpenSandboxBackend
    from runtime.sandbox.opensandbox_box import OpenSandboxSandbox as OpenSandboxSandbox
    from runtime.sandbox.opensandbox_settings import OpenSandboxSettings as OpenSandboxSettings
    from runtime.sandbox.policy import SandboxPolicy as SandboxPolicy
    from runtime.sandbox.policy import ToolLimits as ToolLimits
    from runtime.sandbox.registry import SandboxRegistry as SandboxRegistry
    from runtime.sandbox.workspaces import WorkspaceExistsError as WorkspaceExistsError

__getattr__, __dir__, __all__ = lazy_namespace(__name__, __file__)
