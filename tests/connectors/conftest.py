"""Fixtures the connector tests share."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import fsspec
import pytest


@pytest.fixture
def memory_root() -> Iterator[str]:
    """A directory of fsspec's in-memory file system (a non-local fsspec URL), removed after."""
    root = f"memory://millrace-test-{uuid.uuid4().hex[:8]}"
    yield root
    fs = fsspec.filesystem("memory")
    if fs.exists(root):
        fs.rm(root, recursive=True)
