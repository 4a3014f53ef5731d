"""CheckpointStorage beyond the round trip of ``test_checkpoint_state``: where tasks write their
state, the JSON a person reads, metadata of earlier versions, state on other file systems,
reading by the metadata file, other tools' metadata, savepoints outliving retention."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
import time
from pathlib import Path

import pytest

from millrace.errors import CheckpointError
from millrace.runtime.checkpoint.checkpoint_storage import (
    CheckpointMetadata,
    CheckpointStorage,
    VertexState,
    task_state_path,
)
from millrace.runtime.checkpoint.task_state_snapshot import KeyedStateHandle, TaskStateSnapshot
from millrace.runtime.io.input_split import InputSplit, SplitState
from tests.runtime.checkpoint.test_checkpoint_state import checkpoint


def test_task_state_files_lie_in_the_directory_their_checkpoint_discards(tmp_path) -> None:
    base = f"{tmp_path}/chk/"  # the trailing slash of a configured directory changes nothing
    storage = CheckpointStorage(base, str(tmp_path / "sp"))
    directory = storage.checkpoint_directory("job-1", 5)
    paths = {
        task_state_path(base, "job-1", 5, "win", i, attempt)
        for i in (0, 1)
        for attempt in ("0a1b2c3d4e5f6a7b", "9f8e7d6c5b4a3f2e")
    }
    assert len(paths) == 4  # one file per subtask and attempt
    assert {str(Path(p).parent) for p in paths} == {f"{directory}/win"}
    for p in paths:
        Path(p).parent.mkdir(parents=True, exist_ok=True)
        Path(p).write_bytes(b"state")
    storage.discard_directory(directory)
    assert not (tmp_path / "chk" / "job-1" / "chk-5").exists()


def test_metadata_is_indented_json_that_says_when_it_was_written_in_utc(
    tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("TZ", "EST+05")  # a machine whose local time is not UTC
    time.tzset()
    try:
        storage = CheckpointStorage(str(tmp_path / "chk"), str(tmp_path / "sp"))
        before = dt.datetime.now(dt.UTC).replace(microsecond=0, tzinfo=None)
        storage.write(checkpoint(), storage.checkpoint_directory("job-1", 5))
        after = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    text = (tmp_path / "chk" / "job-1" / "chk-5" / "_metadata").read_text()
    assert len(text.splitlines()) > 50  # one field a line, for a person to read
    written = dt.datetime.strptime(json.loads(text)["written"], "%Y-%m-%dT%H:%M:%SZ")
    # UTC, not the local time 5 h away; the slack absorbs the wall clock being stepped (a VM's
    # clock sync moved it back by a second once between `before` and the write)
    slack = dt.timedelta(seconds=5)
    assert before - slack <= written <= after + slack


def test_metadata_written_before_the_newer_fields_existed_is_still_read(tmp_path) -> None:
    storage = CheckpointStorage(str(tmp_path / "chk"), str(tmp_path / "sp"))
    directory = storage.checkpoint_directory("job-1", 5)
    storage.write(checkpoint(), directory)
    file = Path(directory) / "_metadata"
    data = json.loads(file.read_text())
    del data["earlier_commits"]
    for vertex in data["vertices"]:
        del vertex["finished_splits"], vertex["unassigned_splits"]
        for subtask in vertex["subtasks"].values():
            for split_state in subtask["split_states"]:
                del split_state["watermark_ms"]
    file.write_text(json.dumps(data))
    read = storage.read(directory)
    assert read.earlier_commits == ()
    assert read.vertex("src").finished_splits == () and read.vertex("src").unassigned_splits == ()
    positions = read.vertex("src").subtasks[0].split_states
    assert positions == (SplitState(InputSplit(0, "topic/0"), 42),)


def test_state_elsewhere_keeps_its_url_and_split_states_their_end(tmp_path) -> None:
    handles = (
        KeyedStateHandle("memory://state/w0.parquet", 0, 63, 1),
        KeyedStateHandle("s3://bucket/w1.parquet", 64, 127, 1),
    )
    done = SplitState(InputSplit(2, "topic/2", end_position=10), 10, True, watermark_ms=7_000)
    snapshot = TaskStateSnapshot(keyed_state=handles, split_states=(done,))
    metadata = CheckpointMetadata(
        "job-1", "job", 6, 0, 0, False, 128, [VertexState("win", "w", 1, {0: snapshot})]
    )
    storage = CheckpointStorage(str(tmp_path / "chk"), str(tmp_path / "sp"))
    read = storage.read(storage.write(metadata, storage.checkpoint_directory("job-1", 6)).location)
    assert read.vertex("win").subtasks[0] == snapshot
    assert read.vertex("nothing") is None


def test_a_checkpoint_is_read_by_its_directory_or_its_metadata_file(tmp_path) -> None:
    storage = CheckpointStorage(str(tmp_path / "chk"), str(tmp_path / "sp"))
    directory = storage.checkpoint_directory("job-1", 5)
    storage.write(checkpoint(), directory)
    by_file = storage.read(f"{directory}/_metadata")
    assert by_file == storage.read(directory) and by_file.location == directory


def test_reading_another_tools_metadata_names_the_path_and_its_format(tmp_path) -> None:
    (tmp_path / "_metadata").write_text(json.dumps({"format": "flink-savepoint-v3"}))
    with pytest.raises(CheckpointError, match="is not a Millrace checkpoint") as refused:
        CheckpointStorage(str(tmp_path), str(tmp_path)).read(str(tmp_path))
    assert str(tmp_path) in str(refused.value) and "'flink-savepoint-v3'" in str(refused.value)


def test_discarding_a_savepoint_keeps_its_files(tmp_path) -> None:
    for i in range(2):
        (tmp_path / f"w{i}.parquet").write_bytes(b"state")
    storage = CheckpointStorage(str(tmp_path / "chk"), str(tmp_path / "sp"))
    written = storage.write(checkpoint(str(tmp_path)), storage.checkpoint_directory("job-1", 5))
    savepoint = storage.write_savepoint(written, None)
    storage.discard(savepoint)  # retention discards checkpoints; savepoints are the user's
    assert storage.read(savepoint.location) == savepoint


@pytest.mark.parametrize("last", ["X", " ", "X/"])
def test_directories_are_used_as_named_whatever_their_last_character(tmp_path, last) -> None:
    # rstrip("/") drops trailing slashes only: "ckpt-X" and "ckpt " are names of their own
    base, target = f"{tmp_path}/ckpt-{last}", f"{tmp_path}/sp-{last}"
    storage = CheckpointStorage(base, target)
    directory = storage.checkpoint_directory("job-1", 5)
    assert directory == f"{tmp_path}/ckpt-{last.rstrip('/')}/job-1/chk-5"
    state = Path(task_state_path(base, "job-1", 5, "win", 0, "0a1b2c3d4e5f6a7b"))
    assert str(state.parent) == f"{directory}/win"
    state.parent.mkdir(parents=True)
    state.write_bytes(b"rows")
    handle = KeyedStateHandle(str(state), 0, 127, 1)
    vertex = VertexState("win", "w", 1, {0: TaskStateSnapshot((handle,))})
    metadata = CheckpointMetadata("job-1", "j", 5, 0, 0, False, 128, [vertex])
    written = storage.write(metadata, directory)
    assert storage.read(f"{directory}/_metadata") == written
    savepoint = storage.write_savepoint(written, None)
    assert Path(savepoint.location).parent == Path(target)
    moved = Path(f"{tmp_path}/moved-{last}")  # a savepoint moves to any directory name
    Path(savepoint.location).rename(moved)
    assert storage.read(f"{moved}/_metadata").location == str(moved)


def test_a_metadata_write_that_fails_names_the_directory_the_reason_and_the_file(
    tmp_path,
) -> None:
    (tmp_path / "file").write_text("not a directory")
    storage = CheckpointStorage(str(tmp_path / "chk"), str(tmp_path / "sp"))
    directory = f"{tmp_path}/file/chk-1"
    with pytest.raises(CheckpointError) as failed:
        storage.write(checkpoint(), directory)
    assert str(failed.value) == f"cannot write {directory}: Not a directory: {directory}"


@pytest.mark.parametrize(
    ("error", "shown"),
    [(OSError("disk full"), "disk full"), (OSError(), "OSError"), (TimeoutError(), "TimeoutError")],
)
def test_a_failed_write_without_an_errno_or_a_file_shows_what_the_error_has(
    tmp_path, monkeypatch, error, shown
) -> None:
    class Broken:  # a file system whose every call fails with ``error``
        def makedirs(self, *args: object, **kwargs: object) -> None:
            raise error

    monkeypatch.setattr(
        "millrace.runtime.checkpoint.checkpoint_storage._fs", lambda url: (Broken(), url)
    )
    storage = CheckpointStorage(str(tmp_path / "chk"), str(tmp_path / "sp"))
    with pytest.raises(CheckpointError) as failed:
        storage.write(checkpoint(), "memory://chk-1")
    assert str(failed.value) == f"cannot write memory://chk-1: {shown}"


def test_a_task_state_file_is_named_by_its_subtask_and_the_first_eight_characters_of_its_attempt(
    tmp_path,
) -> None:
    path = task_state_path(str(tmp_path), "job-1", 5, "win", 7, "0a1b2c3d4e5f6a7b")
    assert path == f"{tmp_path}/job-1/chk-5/win/007-0a1b2c3d.parquet"


def test_a_savepoint_directory_is_named_by_the_job_the_checkpoint_and_six_random_digits(
    tmp_path,
) -> None:
    for i in range(2):
        (tmp_path / f"w{i}.parquet").write_bytes(b"state")
    storage = CheckpointStorage(str(tmp_path / "chk"), str(tmp_path / "sp"))
    metadata = dataclasses.replace(checkpoint(str(tmp_path)), job_id="0123456789abcdef")
    written = storage.write(metadata, storage.checkpoint_directory("0123456789abcdef", 5))
    savepoint = storage.write_savepoint(written, None)
    assert re.fullmatch(r"savepoint-01234567-5-[0-9a-f]{6}", Path(savepoint.location).name)


def test_a_checkpoint_names_its_state_files_by_absolute_path_a_savepoint_relatively(
    tmp_path,
) -> None:
    storage = CheckpointStorage(str(tmp_path / "chk"), str(tmp_path / "sp"))
    directory = storage.checkpoint_directory("job-1", 5)
    state = Path(task_state_path(str(tmp_path / "chk"), "job-1", 5, "win", 0, "0a1b2c3d"))
    state.parent.mkdir(parents=True)
    state.write_bytes(b"rows")
    vertex = VertexState(
        "win", "w", 1, {0: TaskStateSnapshot((KeyedStateHandle(str(state), 0, 127, 1),))}
    )
    written = storage.write(
        CheckpointMetadata("job-1", "j", 5, 0, 0, False, 128, [vertex]), directory
    )
    savepoint = storage.write_savepoint(written, None)

    def state_paths(location: str) -> list[str]:
        text = json.loads((Path(location) / "_metadata").read_text())
        return [
            h["path"]
            for v in text["vertices"]
            for s in v["subtasks"].values()
            for h in s["keyed_state"]
        ]

    assert state_paths(written.location) == [str(state)]
    assert state_paths(savepoint.location) == ["win-000-0a1b2c3d.parquet"]


def test_metadata_is_written_through_a_file_in_its_own_directory(tmp_path, monkeypatch) -> None:
    elsewhere = tmp_path / "working-directory"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    storage = CheckpointStorage(str(tmp_path / "chk"), str(tmp_path / "sp"))
    directory = storage.checkpoint_directory("job-1", 5)
    storage.write(checkpoint(), directory)
    assert list(elsewhere.iterdir()) == []
    assert [p.name for p in Path(directory).iterdir()] == ["_metadata"]


def test_metadata_is_written_when_the_working_directory_is_gone(tmp_path, monkeypatch) -> None:
    gone = tmp_path / "working-directory"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()  # a daemon's directory removed under it: only absolute paths still work
    storage = CheckpointStorage(str(tmp_path / "chk"), str(tmp_path / "sp"))
    directory = storage.checkpoint_directory("job-1", 5)
    assert storage.read(storage.write(checkpoint(), directory).location).checkpoint_id == 5
