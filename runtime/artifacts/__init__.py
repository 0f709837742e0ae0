"""Artifacts (CONTRACT §14): files kept beyond their sandbox, in a directory or any S3-compatible store.

``rt.artifacts`` is the ``ArtifactService`` of the current tenant/project; the bytes are in a
``BlobStore`` (``blobs.py``: ``file://`` by default, ``s3.py`` for ``s3://``), the metadata in the
runtime's store (``runtime/store/core/artifacts.py``). See docs/artifacts.md.

Every name is imported on first use (``runtime.lazy``).
"""

from typing import TYPE_CHECKING

from runtime.lazy import lazy_namespace

if TYPE_CHECKING:  # the public names, one import each: lazy_namespace reads them (see runtime.lazy)
    from runtime.artifacts.blobs import BlobStore as BlobStore
    from runtime.artifacts.blobs import FileBlobStore as FileBlobStore
    from runtime.artifacts.blobs import open_blob_store as open_blob_store
    from runtime.artifacts.blobs import resolve_artifacts_url as resolve_artifacts_url
    from runtime.artifacts.model import Artifact as Artifact
    from runtime.artifacts.model import ArtifactRecords as ArtifactRecords
    from runtime.artifacts.service import ArtifactService as ArtifactService

__getattr__, __dir__, __all__ = lazy_namespace(__name__, __file__)
