"""The HttpSource's log: durable appends with offsets, reading from an offset, truncation, and a
writer that starts again continuing the offsets. Real files in a temporary directory."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from millrace.connectors.http_source_log import (
    TRUNCATED,
    WRITER_LOCK,
    IngestLog,
    list_segments,
    truncation_mark,
)
from tests.waiting import result_within


def _lines(*values: int) -> bytes:
    return b"".join(b'{"v": %d}\n' % v for v in values)


def _records(url: str, position: int) -> list[bytes]:
    """Every record at or after ``position``, in offset order, read back from the segments."""
    out: list[bytes] = []
    for segment in list_segments(url):
        if segment.end <= position:
            continue
        lines = Path(segment.url).read_bytes().splitlines()
        assert len(lines) == segment.records
        out += lines[max(0, position - segment.first) :]
    return out


@pytest.fixture
def log(tmp_path: Path):
    log = IngestLog(str(tmp_path / "log"))
    yield log
    log.close()


def test_appends_get_consecutive_offsets_in_sorted_segments(log: IngestLog) -> None:
    assert log.append(_lines(1, 2, 3), 3) == (0, 3)
    assert log.append(_lines(4), 1) == (3, 4)
    assert log.next_offset == 4
    segments = list_segments(log.url)
    assert [(s.first, s.end) for s in segments] == [(0, 3), (3, 4)]
    assert _records(log.url, 0) == _lines(1, 2, 3, 4).splitlines()


def test_an_appended_segment_is_complete_when_append_returns(log: IngestLog) -> None:
    """Durable: the segment is in place under its name, no temporary file is left, and its
    bytes are what was appended (fsynced before the rename; a crash cannot show a partial
    segment under a segment name)."""
    data = _lines(*range(1000))
    log.append(data, 1000)
    names = sorted(set(os.listdir(log.url)) - {WRITER_LOCK})
    assert names == ["00000000000000000000-00000000000000001000.jsonl"]
    assert Path(log.url, names[0]).read_bytes() == data


def test_read_from_an_offset(log: IngestLog) -> None:
    log.append(_lines(1, 2), 2)
    log.append(_lines(3, 4, 5), 3)
    assert _records(log.url, 2) == _lines(3, 4, 5).splitlines()
    assert _records(log.url, 5) == []


def test_truncation_deletes_only_segments_wholly_below_the_position(log: IngestLog) -> None:
    log.append(_lines(1, 2), 2)  # 0..2
    log.append(_lines(3, 4), 2)  # 2..4
    log.append(_lines(5), 1)  # 4..5
    assert log.truncate(3) == 1  # 2..4 holds offset 3: kept
    assert [(s.first, s.end) for s in list_segments(log.url)] == [(2, 4), (4, 5)]
    assert truncation_mark(log.url) == 3
    assert log.truncate(2) == 0  # below the mark: nothing
    assert log.truncate(5) == 2
    assert list_segments(log.url) == []


def test_a_restarted_writer_continues_the_offsets(tmp_path: Path) -> None:
    url = str(tmp_path / "log")
    first = IngestLog(url)
    first.append(_lines(1, 2, 3), 3)
    first.close()
    second = IngestLog(url)
    assert second.append(_lines(4), 1) == (3, 4)
    second.truncate(4)  # every segment gone: the mark keeps the offsets
    second.close()
    third = IngestLog(url)
    assert third.next_offset == 4
    assert third.append(_lines(5), 1) == (4, 5)
    third.close()


def test_appends_through_the_writer_thread_keep_submission_order(log: IngestLog) -> None:
    futures = [log.submit_append(_lines(i), 1) for i in range(50)]
    assert [result_within(f, 30.0, what=f"append {i}") for i, f in enumerate(futures)] == [
        (i, i + 1) for i in range(50)
    ]
    assert _records(log.url, 0) == _lines(*range(50)).splitlines()


def test_a_log_on_fsspec_storage(memory_root: str) -> None:
    import fsspec

    log = IngestLog(f"{memory_root}/log")
    try:
        assert log.append(_lines(1, 2), 2) == (0, 2)
        assert log.append(_lines(3), 1) == (2, 3)
        segments = list_segments(log.url)
        assert [(s.first, s.end) for s in segments] == [(0, 2), (2, 3)]
        with fsspec.open(segments[1].url, "rb") as f:
            assert f.read() == _lines(3)
        assert log.truncate(2) == 1
        assert truncation_mark(log.url) == 2
        assert [(s.first, s.end) for s in list_segments(log.url)] == [(2, 3)]
    finally:
        log.close()


def test_a_second_writer_of_one_log_is_refused(log: IngestLog) -> None:
    """One writer per directory: a stale leader's or a second source's writer would reuse
    offsets another writer already answered 202 for."""
    with pytest.raises(OSError, match="another writer holds it"):
        IngestLog(log.url)
    log.close()
    again = IngestLog(log.url)  # released with the first writer
    again.close()


def test_an_append_never_overwrites_an_existing_segment(log: IngestLog) -> None:
    """A segment already in place (written by a writer whose offsets this one did not know)
    is never replaced: the append fails, nothing appended."""
    existing = Path(log.url, "00000000000000000000-00000000000000000002.jsonl")
    existing.write_bytes(_lines(7, 8))
    with pytest.raises(FileExistsError):
        log.append(_lines(1, 2), 2)
    assert existing.read_bytes() == _lines(7, 8)
    assert log.next_offset == 0


@contextlib.contextmanager
def _umask(mask: int) -> Iterator[None]:
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


def test_the_log_s_files_are_private_to_its_owner(tmp_path: Path) -> None:
    """The writer lock, a segment and the truncation mark are created readable and writable by
    the owner only (0o600), whatever the umask would allow (0 here): ingested records are not
    for other users of the machine."""
    with _umask(0):
        log = IngestLog(str(tmp_path / "log"))
        try:
            log.append(_lines(1), 1)
            log.append(_lines(2), 1)
            assert log.truncate(1) == 1
        finally:
            log.close()
    names = sorted(os.listdir(tmp_path / "log"))
    assert names == [
        "00000000000000000001-00000000000000000002.jsonl",
        TRUNCATED,
        WRITER_LOCK,
    ]
    modes = {name: stat.S_IMODE(os.stat(tmp_path / "log" / name).st_mode) for name in names}
    assert modes == dict.fromkeys(names, 0o600)


def test_the_log_writes_nothing_outside_its_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lock and the temporary files live in the log's directory, not in the working
    directory: the log works with a working directory that no longer exists (where no file
    can be created)."""
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    log = IngestLog(str(tmp_path / "log"))
    try:
        assert log.append(_lines(1, 2), 2) == (0, 2)
        assert log.truncate(2) == 1
        assert truncation_mark(log.url) == 2
    finally:
        log.close()


def test_logs_of_two_directories_have_a_writer_each(tmp_path: Path) -> None:
    """The writer lock is per directory: two sources' logs are written at the same time."""
    first = IngestLog(str(tmp_path / "a"))
    try:
        second = IngestLog(str(tmp_path / "b"))
        try:
            assert first.append(_lines(1), 1) == (0, 1)
            assert second.append(_lines(2), 1) == (0, 1)
        finally:
            second.close()
    finally:
        first.close()


def test_a_write_error_is_raised_even_when_removing_the_temporary_file_fails(
    log: IngestLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file system that turns read-only after an I/O error (ext4's errors=remount-ro): the
    write's OSError is what append raises, not the failed clean-up's, and nothing is appended.
    Faults injected: os.write fails with EIO, then os.unlink of the temporary file with EROFS."""
    real_unlink = os.unlink

    def write(fd: int, data: Any) -> int:
        raise OSError(errno.EIO, "Input/output error")

    def unlink(path: Any, *args: Any, **kwargs: Any) -> None:
        if str(path).endswith(".tmp"):
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        real_unlink(path, *args, **kwargs)

    monkeypatch.setattr(os, "write", write)
    monkeypatch.setattr(os, "unlink", unlink)
    with pytest.raises(OSError) as info:
        log.append(_lines(1), 1)
    assert info.value.errno == errno.EIO
    monkeypatch.undo()
    assert log.next_offset == 0 and list_segments(log.url) == []


def test_only_exact_segment_names_are_segments(log: IngestLog) -> None:
    """Files whose names merely contain a segment name (a trailing space or letter, a
    temporary file, the mark, the lock) are not segments."""
    log.append(_lines(1, 2), 2)
    log.truncate(1)
    name = "00000000000000000002-00000000000000000004.jsonl"
    for other in (f"{name} ", f"{name}X", f".{name}.tmp", f"x{name}"):
        Path(log.url, other).write_bytes(_lines(3, 4))
    assert [(s.first, s.end) for s in list_segments(log.url)] == [(0, 2)]


def test_an_empty_truncation_mark_means_nothing_truncated(tmp_path: Path) -> None:
    """A ``_truncated`` file without a number (e.g. created by hand) reads as 0."""
    directory = tmp_path / "log"
    directory.mkdir()
    (directory / TRUNCATED).write_bytes(b"")
    assert truncation_mark(str(directory)) == 0
    log = IngestLog(str(directory))
    try:
        assert log.next_offset == 0
    finally:
        log.close()


def test_the_log_s_url_has_no_trailing_slash(tmp_path: Path) -> None:
    """``url`` (which the source lists segments from and logs) is the directory given, without
    the trailing slash and nothing else stripped."""
    log = IngestLog(f"{tmp_path}/log-X/")
    try:
        assert log.url == f"{tmp_path}/log-X"
        log.append(_lines(1), 1)
        assert [Path(s.url).parent for s in list_segments(log.url)] == [tmp_path / "log-X"]
    finally:
        log.close()


def test_the_writer_thread_is_named_after_the_log(log: IngestLog) -> None:
    """A timeout's thread dump names the writer thread ``http-source-log_0`` (docs/testing.md:
    thread names say who they are)."""
    before = set(threading.enumerate())
    result_within(log.submit_append(_lines(1), 1), 30.0, what="append")
    assert [t.name for t in set(threading.enumerate()) - before] == ["http-source-log_0"]


def test_truncation_through_the_writer_thread_follows_the_appends(log: IngestLog) -> None:
    """``submit_truncate`` runs after the appends submitted before it; its future gives the
    segments deleted."""
    appends = [log.submit_append(_lines(i), 1) for i in range(3)]
    truncated = log.submit_truncate(2)
    assert result_within(truncated, 30.0, what="truncate") == 2
    assert [result_within(f, 30.0, what="append") for f in appends] == [(0, 1), (1, 2), (2, 3)]
    assert [(s.first, s.end) for s in list_segments(log.url)] == [(2, 3)]
    assert truncation_mark(log.url) == 2


def test_a_truncation_at_the_mark_writes_nothing(log: IngestLog) -> None:
    """A checkpoint that did not move the position (no new records) costs no write: the mark
    file is not replaced (same inode)."""
    log.append(_lines(1, 2), 2)
    assert log.truncate(1) == 0
    inode = os.stat(Path(log.url, TRUNCATED)).st_ino
    assert log.truncate(1) == 0
    assert os.stat(Path(log.url, TRUNCATED)).st_ino == inode
    assert log.truncate(2) == 1
    assert os.stat(Path(log.url, TRUNCATED)).st_ino != inode


def test_truncation_logs_what_it_deleted(log: IngestLog, caplog: pytest.LogCaptureFixture) -> None:
    """The INFO line an operator reads: the log, how many segments went, below which offset."""
    log.append(_lines(1), 1)
    log.append(_lines(2), 1)
    log.append(_lines(3), 1)
    with caplog.at_level(logging.INFO, logger="millrace.connectors.http_source_log"):
        assert log.truncate(2) == 2
    assert [r.getMessage() for r in caplog.records] == [
        f"http source log {log.url}: 2 segments below 2 deleted"
    ]


def test_close_finishes_pending_appends_before_releasing_the_directory(tmp_path: Path) -> None:
    """Every append submitted before ``close`` is done when it returns, so the next writer of
    the directory continues after all of them (never reuses their offsets)."""
    url = str(tmp_path / "log")
    log = IngestLog(url)
    futures = [log.submit_append(_lines(i), 1) for i in range(200)]
    log.close()
    assert all(f.done() for f in futures)
    again = IngestLog(url)
    try:
        assert again.next_offset == 200
    finally:
        again.close()
