"""ParquetSink's two-phase commit, on a local directory: staged files nobody reads, made durable
at pre-commit, renamed into place once per commit (a replay is a no-op), aborted except what
retained checkpoints keep; overwrite and append modes."""

from __future__ import annotations

import os
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from millrace.connectors.parquet_sink import ParquetSink
from millrace.errors import CheckpointError

JOB = "0123456789abcdef0123456789abcdef"
ATTEMPT = "attempt-aaaaaaaa"
OTHER = "attempt-bbbbbbbb"


def delays(*rows: tuple[str, int]) -> pa.Table:
    return pa.table({"carrier": [r[0] for r in rows], "flights": [r[1] for r in rows]})


def visible(out: Path) -> list[tuple[str, int]]:
    """Committed rows, sorted."""
    rows = []
    for f in sorted(out.glob("part-*.parquet")):
        table = pq.read_table(f)
        rows += list(zip(table["carrier"].to_pylist(), table["flights"].to_pylist(), strict=True))
    return sorted(rows)


def test_staged_rows_are_invisible_until_the_commit(tmp_path) -> None:
    sink = ParquetSink(str(tmp_path / "out"))
    sink.initialize_global(JOB)
    written = sink.write(delays(("AA", 3), ("UA", 5)), JOB, 0, 0, ATTEMPT)
    assert written.rows == 2 and written.pending is not None
    assert visible(tmp_path / "out") == []
    sink.pre_commit(JOB, 1, [written.pending])
    sink.commit(JOB, 1, [written.pending])
    assert visible(tmp_path / "out") == [("AA", 3), ("UA", 5)]
    assert (tmp_path / "out" / "_SUCCESS").exists()
    assert not list((tmp_path / "out" / ".pending" / JOB).glob("part-*"))


def test_a_replayed_commit_changes_nothing(tmp_path) -> None:
    sink = ParquetSink(str(tmp_path / "out"))
    staged = sink.write(delays(("AA", 3)), JOB, 0, 0, ATTEMPT).pending
    assert staged is not None
    sink.commit(JOB, 1, [staged])
    files = sorted(p.name for p in (tmp_path / "out").glob("part-*"))
    sink.commit(JOB, 1, [staged])  # after a failover, or named again by a later checkpoint
    assert sorted(p.name for p in (tmp_path / "out").glob("part-*")) == files
    assert visible(tmp_path / "out") == [("AA", 3)]


def test_a_staged_file_lost_before_its_commit_fails_the_commit_naming_it(tmp_path) -> None:
    sink = ParquetSink(str(tmp_path / "out"))
    staged = sink.write(delays(("AA", 3)), JOB, 0, 0, ATTEMPT).pending
    assert staged is not None
    Path(staged).unlink()
    with pytest.raises(CheckpointError, match="is gone"):
        sink.commit(JOB, 4, [staged])
    with pytest.raises(CheckpointError, match="missing at pre-commit") as missing:
        sink.pre_commit(JOB, 4, [staged])
    assert sink.describe() in str(missing.value)


def test_an_empty_table_stages_nothing(tmp_path) -> None:
    sink = ParquetSink(str(tmp_path / "out"))
    written = sink.write(delays(), JOB, 0, 0, ATTEMPT)
    assert written.rows == 0 and written.pending is None


def test_pending_lists_the_files_of_the_given_attempts_only(tmp_path) -> None:
    sink = ParquetSink(str(tmp_path / "out"))
    mine = [sink.write(delays(("AA", i)), JOB, 0, i, ATTEMPT).pending for i in range(2)]
    sink.write(delays(("UA", 9)), JOB, 1, 0, OTHER)
    assert sink.pending(JOB, {ATTEMPT}) == sorted(mine)
    assert sink.pending("another-job", {ATTEMPT}) == []


def test_abort_drops_everything_but_what_is_kept(tmp_path) -> None:
    sink = ParquetSink(str(tmp_path / "out"))
    kept = sink.write(delays(("AA", 1)), JOB, 0, 0, ATTEMPT).pending
    sink.write(delays(("UA", 2)), JOB, 0, 1, ATTEMPT)
    assert kept is not None
    sink.abort(JOB, keep=[kept])
    assert sink.pending(JOB, {ATTEMPT}) == [kept]
    sink.abort(JOB)
    assert not (tmp_path / "out" / ".pending").exists()


def test_overwrite_replaces_earlier_output_and_append_keeps_it(tmp_path) -> None:
    out = tmp_path / "out"
    first = ParquetSink(str(out))
    first.commit(JOB, 1, [first.write(delays(("AA", 1)), JOB, 0, 0, ATTEMPT).pending or ""])
    later = "fedcba9876543210fedcba9876543210"
    appending = ParquetSink(str(out), mode="append")
    appending.initialize_global(later)
    appending.commit(
        later, 1, [appending.write(delays(("UA", 2)), later, 0, 0, OTHER).pending or ""]
    )
    assert visible(out) == [("AA", 1), ("UA", 2)]
    ParquetSink(str(out)).initialize_global("a-third-job")
    assert visible(out) == [] and not (out / "_SUCCESS").exists()


def test_a_commit_creates_the_directory_that_a_resumed_job_never_initialized(tmp_path) -> None:
    sink = ParquetSink(str(tmp_path / "side" / "late"), mode="append")
    sink.commit(JOB, 7, [])  # nothing late in the final commit of a job resumed from a savepoint
    assert (tmp_path / "side" / "late" / "_SUCCESS").exists()


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="mode must be one of"):
        ParquetSink("/tmp/x", mode="upsert")


def test_a_relative_path_is_made_absolute(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert ParquetSink("out").path == str(tmp_path / "out")


def test_staged_files_are_hidden_from_readers_of_the_output_directory(tmp_path) -> None:
    out = tmp_path / "out"
    sink = ParquetSink(str(out))
    sink.initialize_global(JOB)
    staged = sink.write(delays(("AA", 3)), JOB, 0, 0, ATTEMPT).pending
    assert staged is not None
    assert pq.read_table(out).num_rows == 0  # pyarrow (as Spark) skips "." and "_" paths
    sink.commit(JOB, 1, [staged])
    assert pq.read_table(out).to_pylist() == [{"carrier": "AA", "flights": 3}]


def test_abort_leaves_the_output_directory_as_the_commits_left_it(tmp_path) -> None:
    out = tmp_path / "out"
    sink = ParquetSink(str(out))
    sink.initialize_global(JOB)
    committed = sink.write(delays(("AA", 1)), JOB, 0, 0, ATTEMPT).pending
    sink.commit(JOB, 1, [committed or ""])
    output = sorted(["_SUCCESS", *(p.name for p in out.glob("part-*"))])
    sink.write(delays(("UA", 2)), JOB, 0, 1, ATTEMPT)
    sink.write(delays(("B6", 3)), JOB, 1, 0, OTHER)
    sink.abort(JOB)
    assert sorted(p.name for p in out.iterdir()) == output  # nothing staged is left behind
    assert visible(out) == [("AA", 1)]


def test_a_job_starting_again_drops_what_its_earlier_run_staged(tmp_path) -> None:
    sink = ParquetSink(str(tmp_path / "out"), mode="append")
    sink.initialize_global(JOB)
    sink.write(delays(("AA", 1)), JOB, 0, 0, ATTEMPT)
    other = sink.write(delays(("UA", 2)), "f" * 32, 0, 0, ATTEMPT).pending
    sink.initialize_global(JOB)  # the same job prepared again (a JobManager took it over)
    assert sink.pending(JOB, {ATTEMPT}) == []
    assert sink.pending("f" * 32, {ATTEMPT}) == [other]  # another job's staging is its own


def test_a_write_that_fails_half_way_hides_nothing_and_leaves_nothing_after_abort(
    tmp_path, monkeypatch
) -> None:
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    sink = ParquetSink(str(tmp_path / "out"))
    sink.initialize_global(JOB)
    staged = sink.write(delays(("AA", 1)), JOB, 0, 0, ATTEMPT).pending
    union = pa.UnionArray.from_sparse(pa.array([0], pa.int8()), [pa.array([1])])
    with pytest.raises(pa.ArrowNotImplementedError):  # Parquet has no union type
        sink.write(pa.table({"u": union}), JOB, 0, 1, ATTEMPT)
    assert sink.pending(JOB, {ATTEMPT}) == [staged]  # the broken write's remains are no file
    sink.abort(JOB)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == []
    assert list(workdir.iterdir()) == []


def test_the_two_phase_commit_works_on_a_non_local_fsspec_file_system(memory_root) -> None:
    fs = fsspec.filesystem("memory")
    out = f"{memory_root}/out"
    sink = ParquetSink(out, mode="overwrite")
    sink.initialize_global(JOB)
    first = sink.write(delays(("AA", 1)), JOB, 0, 0, ATTEMPT).pending
    second = sink.write(delays(("UA", 2)), JOB, 0, 1, ATTEMPT).pending
    assert sink.pending(JOB, {ATTEMPT}) == sorted([first, second])
    sink.pre_commit(JOB, 1, [first or ""])
    sink.commit(JOB, 1, [first or ""])
    sink.abort(JOB)
    names = sorted(os.path.basename(p) for p in fs.ls(out, detail=False))
    assert names == ["_SUCCESS", f"part-{JOB[:8]}-00000-{ATTEMPT[:8]}-000000.parquet"]
    ParquetSink(out).initialize_global("a-later-job")  # overwrite: the earlier output goes
    assert fs.ls(out, detail=False) == []


def test_abort_drops_a_directory_left_among_the_staged_files_too(tmp_path) -> None:
    sink = ParquetSink(str(tmp_path / "out"))
    sink.write(delays(("AA", 1)), JOB, 0, 0, ATTEMPT)
    left = tmp_path / "out" / ".pending" / JOB / "left-by-another-tool"
    left.mkdir()
    (left / "data").write_bytes(b"x")
    sink.abort(JOB)
    assert not (tmp_path / "out" / ".pending").exists()
