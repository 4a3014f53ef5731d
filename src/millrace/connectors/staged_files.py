"""Durability of staged sink files at a checkpoint barrier (the pre-commit of two-phase commit).

A checkpoint that completes promises that the sink data it lists can be committed, even after
a crash of the machine that wrote it. A file is durable once its bytes and its directory entry
are on disk: ``fsync`` of the file, then of its directory (POSIX: a rename is durable only once
the directory is synced), as Flink's local file sink does when it closes a part for commit.
Remote fsspec file systems (object stores) are durable on close: there the files are only
checked to exist.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Sequence
from typing import Any

from millrace.errors import CheckpointError

__all__ = ["make_durable"]


def make_durable(fs: Any, staged: Sequence[str], describe: str) -> None:
    """fsync every staged file and each directory holding one (local files), or check that
    they exist (other file systems).

    Args:
        fs: The fsspec file system of the files.
        staged: Paths as ``Sink.write`` returned them.
        describe: The sink, for error messages.

    Raises:
        CheckpointError: If a staged file is missing.
        OSError: If the operating system cannot sync a file.

    Threading:
        The writing task's thread, at a checkpoint barrier. Blocking I/O.
    """
    local = "file" in _protocols(fs)
    directories = set()
    for path in staged:
        if not fs.exists(path):
            raise CheckpointError(f"{describe}: staged file {path} is missing at pre-commit")
        if local:
            _fsync(path, os.O_RDONLY)
            directories.add(posixpath.dirname(path))
    for directory in sorted(directories):
        _fsync(directory, os.O_RDONLY | os.O_DIRECTORY)


def _protocols(fs: Any) -> tuple[str, ...]:
    protocol = fs.protocol
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)


def _fsync(path: str, flags: int) -> None:
    descriptor = os.open(path, flags)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
