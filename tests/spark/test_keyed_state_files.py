"""Keyed state as Parquet files (``keyed_state_files``): what a restored subtask reads.

Guarantees guarded (Flink's key groups, "Scaling of keyed state" in Flink's docs):
- a restored subtask reads exactly the rows of its own key groups from every restored state
  file, whatever parallelism wrote them: the subtasks of any new parallelism together read
  every snapshotted row once (nothing lost, nothing duplicated), the rows at both ends of every
  key-group range included;
- a file whose key-group range lies outside the subtask's is not opened; one that touches the
  range at its first or last key group is;
- a snapshot writes exactly the table's rows under the checkpoint's layout (job, ``chk-<id>``,
  vertex, subtask, attempt; ``part`` suffix), and names the writer's key-group range, its rows
  and its size; an empty table writes nothing;
- live state files round-trip through the exchange store (files of two schemas concatenate to
  one), and removing one twice is fine.

No Spark here: the module is pyarrow and fsspec only, so these are fast unit tests.
Comparisons are multisets (``collections.Counter`` of rows).
"""

from __future__ import annotations

import os
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from millrace.config import Configuration
from millrace.runtime.checkpoint.key_groups import KeyGroupRange, key_group_range
from millrace.runtime.checkpoint.task_state_snapshot import KeyedStateHandle, TaskStateSnapshot
from millrace.runtime.deployment import TaskDeploymentDescriptor
from millrace.spark.keyed_state_files import (
    concat_tables,
    key_group_tables,
    read_key_groups,
    remove_file,
    write_snapshot,
    write_state_file,
)
from millrace.types import Address, AllocationId, ExecutionAttemptId, JobId, JobVertexId

MAX_PARALLELISM = 128


def tdd(subtask: int, parallelism: int, attempt: str = "attempt-0123456789") -> Any:
    return TaskDeploymentDescriptor(
        JobId("job-1"),
        "job",
        Address("local://test/jobmaster"),
        JobVertexId("window-vertex"),
        f"window ({subtask + 1}/{parallelism})",
        subtask,
        parallelism,
        ExecutionAttemptId(attempt),
        AllocationId("slot-0"),
        "millrace.spark.window_stream_task:WindowStreamTask",
        (),
        False,
        None,
        0,
        (),
        MAX_PARALLELISM,
    )


def rows_table(rows: list[tuple[int, str, int]]) -> Any:
    """State rows ``(key group, key, value)``: ``__kg`` as a keyed task keeps it (int32)."""
    return pa.table(
        {
            "__kg": pa.array([r[0] for r in rows], pa.int32()),
            "carrier": pa.array([r[1] for r in rows], pa.string()),
            "seats": pa.array([r[2] for r in rows], pa.int64()),
        }
    )


def as_rows(table: Any) -> Counter:
    if table is None:
        return Counter()
    return Counter(
        zip(
            table.column("__kg").to_pylist(),
            table.column("carrier").to_pylist(),
            table.column("seats").to_pylist(),
            strict=True,
        )
    )


def state_rows(subtask: int, parallelism: int) -> list[tuple[int, str, int]]:
    """Rows of a writer subtask: every key group at both ends of every range of parallelism
    1, 2, 3 and 128 that the writer owns, plus a middle one, with a duplicated row."""
    own = key_group_range(MAX_PARALLELISM, parallelism, subtask)
    ends = set()
    for p in (1, 2, 3, 4, MAX_PARALLELISM):
        for i in range(p):
            r = key_group_range(MAX_PARALLELISM, p, i)
            ends |= {r.start, r.end}
    groups = sorted(g for g in ends | {(own.start + own.end) // 2} if g in own)
    rows = [(g, f"k{g}", g * 10 + subtask) for g in groups]
    return [*rows, rows[0]]  # the same row twice: both must come back


def snapshot_at(
    directory: str, parallelism: int, checkpoint_id: int = 7
) -> tuple[TaskStateSnapshot, Counter]:
    """Every subtask of ``parallelism`` snapshots its rows; the restore snapshot lists all
    their handles (as the JobMaster hands a vertex's state to every new subtask)."""
    configuration = Configuration({"state.checkpoints.dir": directory})
    handles: list[KeyedStateHandle] = []
    written: Counter = Counter()
    for subtask in range(parallelism):
        rows = state_rows(subtask, parallelism)
        written += Counter(rows)
        own = key_group_range(MAX_PARALLELISM, parallelism, subtask)
        handles += write_snapshot(
            rows_table(rows), configuration, tdd(subtask, parallelism), checkpoint_id, own
        )
    return TaskStateSnapshot(keyed_state=tuple(handles), watermark_ms=5), written


@pytest.mark.parametrize("old", [1, 2, 3])
@pytest.mark.parametrize("new", [1, 2, 3, 4, MAX_PARALLELISM])
def test_restored_subtasks_read_exactly_their_key_groups_and_together_every_row_once(
    tmp_path: Path, old: int, new: int
) -> None:
    snapshot, written = snapshot_at(str(tmp_path), old)
    restored: Counter = Counter()
    for subtask in range(new):
        own = key_group_range(MAX_PARALLELISM, new, subtask)
        got = as_rows(read_key_groups(snapshot, own))
        assert got == Counter({r: n for r, n in written.items() if r[0] in own}), (subtask, own)
        restored += got
    assert restored == written


def test_a_snapshot_in_an_fsspec_store_restores_the_same(tmp_path: Path) -> None:
    """The checkpoint directory may be any fsspec URL (here the in-memory filesystem)."""
    url = f"memory://checkpoints-{uuid.uuid4().hex}"
    snapshot, written = snapshot_at(url, 2)
    assert all(h.path.startswith(url) for h in snapshot.keyed_state)
    restored = Counter()
    for subtask in range(3):
        restored += as_rows(read_key_groups(snapshot, key_group_range(128, 3, subtask)))
    assert restored == written


def test_a_snapshot_names_its_file_key_groups_rows_and_size(tmp_path: Path) -> None:
    configuration = Configuration({"state.checkpoints.dir": f"{tmp_path}/"})
    rows = [(70, "AA", 1), (64, "B6", 2), (127, "DL", 3)]
    own = KeyGroupRange(64, 127)
    (handle,) = write_snapshot(rows_table(rows), configuration, tdd(1, 2), 12, own)
    expected = tmp_path / "job-1" / "chk-12" / "window-vertex" / "001-attempt-.parquet"
    assert handle == KeyedStateHandle(str(expected), 64, 127, 3, os.path.getsize(expected))
    assert as_rows(pq.read_table(expected)) == Counter(rows)

    (part,) = write_snapshot(rows_table(rows[:1]), configuration, tdd(1, 2), 12, own, "-in1")
    assert part.path == str(expected.with_name("001-attempt--in1.parquet"))
    assert (part.rows, part.key_group_start, part.key_group_end) == (1, 64, 127)
    assert as_rows(pq.read_table(part.path)) == Counter(rows[:1])


@pytest.mark.parametrize("table", [None, rows_table([])], ids=["none", "no-rows"])
def test_an_empty_state_writes_no_snapshot(tmp_path: Path, table: Any) -> None:
    configuration = Configuration({"state.checkpoints.dir": str(tmp_path)})
    assert write_snapshot(table, configuration, tdd(0, 1), 3, KeyGroupRange(0, 127)) == ()
    assert list(tmp_path.iterdir()) == []


def handle(path: str, start: int, end: int) -> KeyedStateHandle:
    return KeyedStateHandle(path, start, end, 1)


@pytest.mark.parametrize(
    ("own", "opened"),
    [
        (KeyGroupRange(0, 63), []),  # ends one group before the file's range
        (KeyGroupRange(0, 64), [64]),  # touches its first group
        (KeyGroupRange(100, 127), [100, 127]),  # inside
        (KeyGroupRange(127, 127), [127]),  # touches its last group
    ],
)
def test_files_outside_the_subtasks_range_are_not_opened_and_touching_ones_are(
    tmp_path: Path, own: KeyGroupRange, opened: list[int]
) -> None:
    """A handle for key groups 64..127 next to handles of missing files whose ranges lie just
    outside ``own``: reading them would fail, so they must be skipped."""
    path = str(tmp_path / "state.parquet")
    pq.write_table(rows_table([(64, "AA", 1), (100, "B6", 2), (127, "DL", 3)]), path)
    missing = str(tmp_path / "missing.parquet")
    handles = [handle(path, 64, 127)]
    if own.start > 0:
        handles.append(handle(missing, 0, own.start - 1))
    if own.end < 127:
        handles.append(handle(missing, own.end + 1, 127))
    tables = key_group_tables(TaskStateSnapshot(keyed_state=tuple(handles)), own)
    if not opened:
        assert tables == []
        assert read_key_groups(TaskStateSnapshot(keyed_state=tuple(handles)), own) is None
        return
    (table,) = tables
    assert sorted(table.column("__kg").to_pylist()) == opened


def test_a_file_of_the_range_without_its_rows_restores_nothing(tmp_path: Path) -> None:
    """A file overlapping the range whose rows all lie outside it: an empty table per file,
    and no restored rows at all (None), as for no file."""
    path = str(tmp_path / "state.parquet")
    pq.write_table(rows_table([(10, "AA", 1)]), path)
    snapshot = TaskStateSnapshot(keyed_state=(handle(path, 0, 63),))
    (table,) = key_group_tables(snapshot, KeyGroupRange(11, 63))
    assert table.num_rows == 0
    assert read_key_groups(snapshot, KeyGroupRange(11, 63)) is None
    assert read_key_groups(TaskStateSnapshot(), KeyGroupRange(0, 127)) is None


def test_restored_files_keep_their_schema_metadata_and_promote_to_one_schema(
    tmp_path: Path,
) -> None:
    """Two writers' files, one with a column the other lacks (null there), one with schema
    metadata: one table, every row, the metadata kept."""
    first = rows_table([(1, "AA", 1), (2, "B6", 2)]).replace_schema_metadata({b"k": b"v"})
    second = rows_table([(3, "DL", 3)]).append_column("extra", pa.array([1.5]))
    paths = [str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")]
    pq.write_table(first, paths[0])
    pq.write_table(second, paths[1])
    snapshot = TaskStateSnapshot(keyed_state=(handle(paths[0], 0, 2), handle(paths[1], 3, 3)))
    tables = key_group_tables(snapshot, KeyGroupRange(0, 127))
    assert tables[0].schema.metadata == {b"k": b"v"}
    restored = read_key_groups(snapshot, KeyGroupRange(0, 127))
    assert as_rows(restored) == Counter([(1, "AA", 1), (2, "B6", 2), (3, "DL", 3)])
    assert restored.column("extra").to_pylist() == [None, None, 1.5]


def test_live_state_files_round_trip_and_are_removed(tmp_path: Path) -> None:
    tables = [rows_table([(1, "AA", 1), (1, "AA", 1)]), rows_table([(9, "B6", 2)])]
    paths = [
        write_state_file(t, str(tmp_path / "state"), f"{i}.parquet") for i, t in enumerate(tables)
    ]
    assert paths == [str(tmp_path / "state" / "0.parquet"), str(tmp_path / "state" / "1.parquet")]
    assert as_rows(concat_tables(paths)) == Counter([(1, "AA", 1), (1, "AA", 1), (9, "B6", 2)])
    assert concat_tables([]) is None
    remove_file(paths[0])
    assert not os.path.exists(paths[0]) and os.path.exists(paths[1])
    remove_file(paths[0])  # already gone: fine
    assert as_rows(concat_tables(paths[1:])) == Counter([(9, "B6", 2)])


def test_live_state_files_of_two_schemas_concatenate_to_one(tmp_path: Path) -> None:
    """Live state files written before and after a column appeared (an aggregate's column that
    a later file adds): one table, every row, the missing column null in the earlier rows."""
    earlier = rows_table([(1, "AA", 1), (2, "B6", 2)])
    later = rows_table([(3, "DL", 3)]).append_column("extra", pa.array([1.5]))
    paths = [
        write_state_file(t, str(tmp_path / "state"), f"{i}.parquet")
        for i, t in enumerate([earlier, later])
    ]
    table = concat_tables(paths)
    assert as_rows(table) == Counter([(1, "AA", 1), (2, "B6", 2), (3, "DL", 3)])
    assert table.column("extra").to_pylist() == [None, None, 1.5]
