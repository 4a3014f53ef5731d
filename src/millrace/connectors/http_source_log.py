"""The HttpSource's message store (seed 001's source-end message store): a log of JSON lines in
segments on fsspec storage, each record with an offset.

Layout of a log directory::

    <dir>/00000000000000000000-00000000000000000100.jsonl   records 0..99 (one accepted POST)
    <dir>/00000000000000000100-00000000000000000103.jsonl   records 100..102
    <dir>/_truncated                                          "100": offsets below are gone

A segment holds the lines of one accepted request, named by its first offset and its end
(exclusive, 20 digits each, so names sort by offset). It is written under a hidden name
(``.<first>.tmp``), flushed and fsynced, renamed into place and the directory fsynced (local
storage; on object stores the closed object is the durable unit and is written under its final
name), before :meth:`IngestLog.append` returns: a segment that can be listed is complete and
durable, and segments appear in offset order. Offsets are the source's checkpointed positions;
:meth:`IngestLog.truncate` deletes the segments wholly below a committed position and records
it in ``_truncated``, so a writer that starts again on the directory continues the offsets
(the highest segment end, or the truncation mark when every segment is gone).

Threading:
    One writer per directory. :class:`IngestLog` runs every append and truncation on its own
    single writer thread (``submit_append`` / ``submit_truncate`` return futures), so nothing
    is shared between threads; readers (``list_segments``) only list and read.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

__all__ = ["IngestLog", "Segment", "list_segments", "truncation_mark"]

logger = logging.getLogger(__name__)

_SEGMENT = re.compile(r"^(\d{20})-(\d{20})\.jsonl$")
TRUNCATED = "_truncated"
WRITER_LOCK = "_writer.lock"


@dataclass(frozen=True, order=True)
class Segment:
    """One segment file.

    Attributes:
        first: Offset of its first record.
        end: Offset after its last record (exclusive).
        url: Its fsspec URL (or local path).
    """

    first: int
    end: int
    url: str

    @property
    def records(self) -> int:
        return self.end - self.first


def _fs(url: str) -> tuple[Any, str]:
    import fsspec.core

    fs, path = fsspec.core.url_to_fs(url)
    return fs, path


def _is_local(fs: Any) -> bool:
    from fsspec.implementations.local import LocalFileSystem

    return isinstance(fs, LocalFileSystem)


def list_segments(url: str) -> list[Segment]:
    """The complete segments of the log at ``url``, in offset order (blocking I/O).

    Returns:
        Segments sorted by first offset; empty if the directory does not exist yet.
    """
    fs, path = _fs(url)
    try:
        names = fs.ls(path, detail=False)
    except FileNotFoundError:
        return []
    segments = []
    for name in names:
        match = _SEGMENT.match(name.rstrip("/").rsplit("/", 1)[-1])
        if match:
            full = name if _is_local(fs) else fs.unstrip_protocol(name)
            segments.append(Segment(int(match.group(1)), int(match.group(2)), full))
    return sorted(segments)


def truncation_mark(url: str) -> int:
    """The offset below which the log at ``url`` was truncated (0 if never)."""
    fs, path = _fs(url)
    try:
        with fs.open(f"{path}/{TRUNCATED}", "rb") as f:
            return int(f.read().decode().strip() or 0)
    except FileNotFoundError:
        return 0


class IngestLog:
    """The writer of one log directory.

    Args:
        url: The directory (local path or fsspec URL); created if missing. An existing log is
            continued: the next offset is the highest segment end or the truncation mark.

    Threading:
        Construct anywhere (blocking I/O); ``append`` and ``truncate`` on the writer thread
        only (use ``submit_append`` / ``submit_truncate`` from any thread).
    """

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self._fs, self._path = _fs(self.url)
        self._fs.makedirs(self._path, exist_ok=True)
        self._lock_fd = _lock_writer(self._path) if _is_local(self._fs) else None
        segments = list_segments(self.url)
        self._truncated = truncation_mark(self.url)
        self._next = max([self._truncated, *(s.end for s in segments)])
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="http-source-log")

    @property
    def next_offset(self) -> int:
        """Offset the next appended record gets (read on the writer thread, or when idle)."""
        return self._next

    def submit_append(self, data: bytes, records: int) -> Future[tuple[int, int]]:
        """``append`` on the writer thread."""
        return self._writer.submit(self.append, data, records)

    def submit_truncate(self, position: int) -> Future[int]:
        """``truncate`` on the writer thread."""
        return self._writer.submit(self.truncate, position)

    def append(self, data: bytes, records: int) -> tuple[int, int]:
        """Write ``records`` JSON lines as one durable segment.

        Args:
            data: The lines, ``\\n``-separated, ending with ``\\n``; no empty line.
            records: How many lines ``data`` holds (> 0).

        Returns:
            ``(first, end)``: the offsets of the first record and after the last one.

        Raises:
            OSError: If the segment cannot be written; nothing is appended then (the offsets
                are not used).
        """
        first, end = self._next, self._next + records
        name = f"{first:020d}-{end:020d}.jsonl"
        if _is_local(self._fs):
            _write_local(self._path, name, data, overwrite=False)
        else:
            with self._fs.open(f"{self._path}/{name}", "wb") as f:
                f.write(data)
        self._next = end
        return first, end

    def truncate(self, position: int) -> int:
        """Delete every segment whose records are all below ``position`` (a committed
        checkpoint's offset) and record the mark; returns how many segments went.

        Raises:
            OSError: If the mark or a segment cannot be written or deleted.
        """
        if position <= self._truncated:
            return 0
        gone = [s for s in list_segments(self.url) if s.end <= position]
        mark = f"{position}\n".encode()
        if _is_local(self._fs):
            _write_local(self._path, TRUNCATED, mark, overwrite=True)
        else:
            with self._fs.open(f"{self._path}/{TRUNCATED}", "wb") as f:
                f.write(mark)
        self._truncated = position
        for segment in gone:
            self._fs.rm(segment.url)
        if gone:
            logger.info(
                "http source log %s: %d segments below %d deleted", self.url, len(gone), position
            )
        return len(gone)

    def close(self) -> None:
        """Finish pending writes, stop the writer thread and release the directory."""
        self._writer.shutdown(wait=True)
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None


def _lock_writer(directory: str) -> int:
    """Hold ``directory/_writer.lock`` exclusively (flock) for the log's lifetime: one writer
    per log, so two (a stale leader's and a new one's, or two sources of one name) never write
    the same offsets. Raises OSError naming the directory if another writer holds it."""
    fd = os.open(os.path.join(directory, WRITER_LOCK), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise OSError(f"http source log {directory}: another writer holds it") from None
    return fd


def _write_local(directory: str, name: str, data: bytes, *, overwrite: bool) -> None:
    """Write ``directory/name`` durably: temporary file, fsync, rename (or, without
    ``overwrite``, a hard link that fails with FileExistsError if the name exists), directory
    fsync."""
    temporary = os.path.join(directory, f".{name}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)  # a write cut short (disk full, file size limit) leaves nothing
        raise
    if overwrite:
        os.replace(temporary, os.path.join(directory, name))
    else:
        try:  # never over an existing file: a segment answered 202 is never overwritten
            os.link(temporary, os.path.join(directory, name))
        finally:
            os.unlink(temporary)
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
