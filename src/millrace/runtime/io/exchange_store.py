"""The exchange store: the Parquet files subtasks hand each other (bundles of an exchange) and
keep as their keyed state's live files, under one directory per job.

A local directory by default (``<io.tmp.dirs>/jobs``); ``io.exchange.dir`` names another: a
directory every host mounts, or any fsspec URL (``file://``, ``s3a://``, ...) that Spark's
sessions can read as well, so TaskManagers and Spark executors on other hosts reach the files
(issue 15; the brief's "any fsspec URL the Spark session can also read"). pyarrow writes and
reads the files through fsspec; Spark reads them by the names the producers emitted. Names are
the store's own: plain paths in a local directory, URLs with their protocol otherwise.

Every process of a cluster must name the same store (the JobMaster empties a job's directory
before each attempt and removes it when the job ends; the TaskManagers write into it).

Threading: any thread; each call is one filesystem operation (or a few) and blocks on it.
"""

from __future__ import annotations

import contextlib
import logging
import posixpath
from typing import Any

from millrace.config import ClusterOptions, Configuration

__all__ = [
    "glob",
    "job_directory",
    "join",
    "mark_partition",
    "parquet_rows",
    "parquet_schema",
    "partition_directory",
    "read_parquet",
    "remove_file",
    "remove_tree",
    "write_parquet",
]

logger = logging.getLogger(__name__)

PARTITION_MARKER = "_partition"
"""The empty file a blocking producer leaves in its partition's directory, so the directory
exists even when no record went out (object stores have no empty directories)."""


def job_directory(configuration: Configuration, job_id: str) -> str:
    """The directory (path or URL) of job ``job_id`` in the store ``io.exchange.dir`` names.

    Raises:
        ConfigError: If ``io.exchange.dir`` is not a directory or a URL of an installed fsspec
            protocol.
    """
    return join(configuration.get(ClusterOptions.EXCHANGE_DIR), job_id)


def join(base: str, *parts: str) -> str:
    """``base`` (a path or URL) with ``parts`` appended, ``/``-separated."""
    return posixpath.join(base, *parts)


def partition_directory(job_dir: str, vertex_id: str, attempt_id: str) -> str:
    """The directory of the files producer attempt ``attempt_id`` of vertex ``vertex_id``
    writes (its result partition's), under the job's directory ``job_dir``. Per attempt: a
    zombie of a failed attempt can never overwrite a file a later attempt announced."""
    return join(job_dir, "exchange", vertex_id, attempt_id)


def write_parquet(table: Any, path: str, row_group_size: int | None = None) -> int:
    """Write ``table`` (``pyarrow.Table``) as the Parquet file ``path``, creating its
    directory; the file appears whole (written under ``.tmp`` then renamed). Row groups of
    at most ``row_group_size`` rows (None: pyarrow's default).

    Returns:
        The file's size in bytes.

    Raises:
        OSError: If the store cannot be written.
    """
    import pyarrow.parquet as pq

    fs, target = _filesystem(path)
    fs.makedirs(posixpath.dirname(target), exist_ok=True)
    tmp = target + ".tmp"
    if _is_local(fs):
        pq.write_table(table, tmp, row_group_size=row_group_size)
    else:
        with fs.open(tmp, "wb") as f:
            pq.write_table(table, f, row_group_size=row_group_size)
    size = int(fs.size(tmp))
    fs.mv(tmp, target)
    return size


def read_parquet(path: str) -> Any:
    """The rows of the Parquet file ``path`` (``pyarrow.Table``).

    Raises:
        OSError: If the file cannot be read (FileNotFoundError if it is gone).
    """
    import pyarrow.parquet as pq

    return _read(path, pq.read_table)


def parquet_rows(path: str) -> int:
    """The number of rows of the Parquet file ``path``, from its footer."""
    import pyarrow.parquet as pq

    return int(_read(path, pq.read_metadata).num_rows)


def parquet_schema(path: str) -> Any:
    """The ``pyarrow.Schema`` of the Parquet file ``path``, from its footer."""
    import pyarrow.parquet as pq

    return _read(path, pq.read_schema)


def mark_partition(directory: str) -> None:
    """Leave the empty ``_partition`` file in a blocking producer's ``directory``."""
    fs, target = _filesystem(directory)
    fs.makedirs(target, exist_ok=True)
    fs.touch(posixpath.join(target, PARTITION_MARKER))


def glob(pattern: str) -> list[str]:
    """The store's names (as ``pattern`` is written: a path or a URL) matching ``pattern``,
    sorted."""
    fs, target = _filesystem(pattern)
    found = sorted(fs.glob(target))
    if "://" not in pattern:
        return found
    if pattern.endswith(target):  # keep the pattern's own protocol (s3a://, not s3://)
        head = pattern[: len(pattern) - len(target)]
        return [head + p for p in found]
    return [fs.unstrip_protocol(p) for p in found]


def remove_file(path: str) -> None:
    """Delete the file ``path``; one already gone is fine."""
    fs, target = _filesystem(path)
    with contextlib.suppress(FileNotFoundError):
        fs.rm_file(target)


def remove_tree(directory: str) -> None:
    """Delete ``directory`` and everything under it, as far as the store lets it; nothing
    there is fine. Never raises: what cannot be removed (a zombie task of a failed attempt
    still writing, a store that refuses) is logged at WARNING and left; every later attempt
    writes under names of its own."""
    fs, target = _filesystem(directory)
    try:
        fs.rm(target, recursive=True)
    except FileNotFoundError:
        pass
    except OSError as error:
        logger.warning("could not remove all of %s from the exchange store: %s", directory, error)


def _filesystem(path: str) -> tuple[Any, str]:
    import fsspec

    fs, target = fsspec.core.url_to_fs(path)
    return fs, str(target)


def _read(path: str, read: Any) -> Any:
    """``read`` (a pyarrow reader) of the file ``path``: by name in a local directory (pyarrow's
    own file access), else through an fsspec file object."""
    fs, target = _filesystem(path)
    if _is_local(fs):
        return read(target)
    with fs.open(target, "rb") as f:
        return read(f)


def _is_local(fs: Any) -> bool:
    from fsspec.implementations.local import LocalFileSystem

    return isinstance(fs, LocalFileSystem)
