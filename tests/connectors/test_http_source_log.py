"""The HttpSource's log: durable appends with offsets, reading from an offset, truncation, and a
writer that starts again continuing the offsets. Real files in a temporary directory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from millrace.connectors.http_source_log import (
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
