"""Key groups, checkpoint metadata on storage, savepoints, and state assignment at another
parallelism."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from millrace.errors import CheckpointError
from millrace.runtime.checkpoint.checkpoint_storage import (
    CheckpointMetadata,
    CheckpointStorage,
    SinkCommit,
    VertexState,
)
from millrace.runtime.checkpoint.key_groups import key_group_range
from millrace.runtime.checkpoint.state_assignment import assign_state
from millrace.runtime.checkpoint.task_state_snapshot import KeyedStateHandle, TaskStateSnapshot
from millrace.runtime.io.input_split import InputSplit, SplitState
from millrace.runtime.jobgraph import JobGraph, JobVertex


@pytest.mark.parametrize("parallelism", [1, 2, 3, 7, 128])
def test_key_group_ranges_partition_the_key_groups_as_the_exchange_routes_them(
    parallelism: int,
) -> None:
    owners = {}
    for index in range(parallelism):
        r = key_group_range(128, parallelism, index)
        for kg in range(r.start, r.end + 1):
            assert kg not in owners
            owners[kg] = index
    assert sorted(owners) == list(range(128))
    assert all(owners[kg] == kg * parallelism // 128 for kg in range(128))  # target_subtask


def test_key_group_range_rejects_a_parallelism_above_the_key_groups() -> None:
    with pytest.raises(ValueError):
        key_group_range(4, 5, 0)


def graph(window_parallelism: int, source_parallelism: int = 2) -> JobGraph:
    source = JobVertex("source", source_parallelism, "m:Source", (), True, "src")
    window = JobVertex("window", window_parallelism, "m:Window", (), False, "win")
    return JobGraph("job", [source, window], [], 128, "job-1")


def checkpoint(location: str = "") -> CheckpointMetadata:
    halves = [key_group_range(128, 2, i) for i in range(2)]
    split = InputSplit(0, "topic/0")
    source = VertexState(
        "src",
        "source",
        2,
        {
            0: TaskStateSnapshot(
                split_states=(SplitState(split, 42),), finished_splits=("a",), watermark_ms=90
            ),
            1: TaskStateSnapshot(finished_splits=("b",), watermark_ms=80),
        },
        finished_splits=("old",),
        unassigned_splits=(
            SplitState(InputSplit(3, "topic/3"), 7),  # no subtask named it: restored at 7
            SplitState(split, 5),  # subtask 0 snapshotted it later, at 42: the task wins
            SplitState(InputSplit(4, "a"), 9),  # finished by subtask 0 meanwhile
        ),
    )
    window = VertexState(
        "win",
        "window",
        2,
        {
            i: TaskStateSnapshot(
                keyed_state=(KeyedStateHandle(f"{location}/w{i}.parquet", r.start, r.end, 10),),
                sink_pending={1: (f"/out/.pending/job-1/p{i}",)},
                watermark_ms=70 + i,
            )
            for i, r in enumerate(halves)
        },
    )
    earlier = (SinkCommit("job-0", 3, {("win", 1): ("/out/.pending/job-0/p9",)}),)
    return CheckpointMetadata(
        "job-1", "job", 5, 1000, 1100, False, 128, [source, window], earlier_commits=earlier
    )


def test_same_parallelism_restores_each_subtask_its_own_state() -> None:
    assignment = assign_state(checkpoint(), graph(2))
    for i in range(2):
        restored = assignment.tasks[("win", i)]
        assert [h.path for h in restored.keyed_state] == [f"/w{i}.parquet"]
        assert restored.watermark_ms == 70 + i
    source = assignment.sources["src"]
    assert source.finished == {"a", "b", "old"}
    assert [(s.split.split_id, s.position) for s in source.open] == [
        ("topic/0", 42),
        ("topic/3", 7),
    ]


def test_rescaling_hands_every_new_subtask_the_files_of_its_key_groups() -> None:
    assignment = assign_state(checkpoint(), graph(3))
    paths = {i: {h.path for h in assignment.tasks[("win", i)].keyed_state} for i in range(3)}
    assert paths == {0: {"/w0.parquet"}, 1: {"/w0.parquet", "/w1.parquet"}, 2: {"/w1.parquet"}}
    assert all(assignment.tasks[("win", i)].watermark_ms == 70 for i in range(3))  # the min


def test_state_of_a_vertex_the_job_lacks_is_an_error() -> None:
    job = graph(2)
    job.vertices = job.vertices[:1]
    with pytest.raises(CheckpointError, match="'window'"):
        assign_state(checkpoint(), job)


def test_other_key_group_count_is_an_error() -> None:
    job = graph(2)
    job.max_parallelism = 64
    with pytest.raises(CheckpointError, match="max-parallelism"):
        assign_state(checkpoint(), job)


def test_metadata_round_trips_through_storage_as_readable_json(tmp_path) -> None:
    storage = CheckpointStorage(str(tmp_path / "chk"), str(tmp_path / "sp"))
    directory = storage.checkpoint_directory("job-1", 5)
    written = storage.write(checkpoint(), directory)
    data = json.loads((tmp_path / "chk" / "job-1" / "chk-5" / "_metadata").read_text())
    assert data["checkpoint_id"] == 5 and data["vertices"][1]["name"] == "window"
    read = storage.read(directory)
    assert read == written
    assert read.vertex("src").unassigned_splits[0] == SplitState(InputSplit(3, "topic/3"), 7)
    assert read.sink_pending() == {("win", 1): ["/out/.pending/job-1/p0", "/out/.pending/job-1/p1"]}
    assert [(c.job_id, c.checkpoint_id) for c in read.commits()] == [("job-0", 3), ("job-1", 5)]
    assert read.commits()[0].pending == {("win", 1): ("/out/.pending/job-0/p9",)}
    storage.discard(read)
    assert not (tmp_path / "chk" / "job-1" / "chk-5").exists()


def test_savepoint_is_a_self_contained_copy_that_can_move(tmp_path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    for i in range(2):
        (state / f"w{i}.parquet").write_bytes(b"state %d" % i)
    storage = CheckpointStorage(str(tmp_path / "chk"), str(tmp_path / "sp"))
    written = storage.write(checkpoint(str(state)), storage.checkpoint_directory("job-1", 5))
    savepoint = storage.write_savepoint(written, None)
    moved = tmp_path / "moved"
    (tmp_path / "sp").rename(moved)
    read = storage.read(str(moved / savepoint.location.rsplit("/", 1)[1]))
    assert read.is_savepoint and read.sink_pending() == {}
    for handle in read.vertex("win").subtasks[1].keyed_state:
        assert handle.path.startswith(str(moved))
        assert Path(handle.path).read_bytes() == b"state 1"


def test_reading_something_else_fails_clearly(tmp_path) -> None:
    with pytest.raises(CheckpointError, match="no checkpoint metadata"):
        CheckpointStorage(str(tmp_path), str(tmp_path)).read(str(tmp_path / "nothing"))


def test_a_savepoint_that_cannot_be_written_fails_naming_the_directory(tmp_path) -> None:
    storage = CheckpointStorage(str(tmp_path / "chk"), str(tmp_path / "sp"))
    written = storage.write(checkpoint(), storage.checkpoint_directory("job-1", 5))
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(CheckpointError, match=r"cannot write savepoint .*a-file/below/savepoint-"):
        storage.write_savepoint(written, str(blocker / "below"))
    with pytest.raises(CheckpointError, match=r"cannot write .*a-file/chk-5"):
        storage.write(checkpoint(), str(blocker / "chk-5"))
