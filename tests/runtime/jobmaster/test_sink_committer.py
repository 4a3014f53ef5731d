"""SinkCommitter: commits in checkpoint order on its own thread, an earlier checkpoint's
commit before the one that names it, each under its own id; restore commits, then aborts."""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pytest

from millrace.connectors.parquet_sink import ParquetSink
from millrace.runtime.checkpoint.checkpoint_storage import (
    CheckpointMetadata,
    SinkCommit,
    VertexState,
)
from millrace.runtime.checkpoint.task_state_snapshot import TaskStateSnapshot
from millrace.runtime.jobmaster.sink_committer import SinkCommitter
from tests.waiting import result_within, wait_until


class RecordingSink:
    """Records every call; ``fail_commits`` makes that many commits raise first."""

    def __init__(self, name: str, fail_commits: int = 0) -> None:
        self.name = name
        self.calls: list[tuple[str, ...]] = []
        self.threads: list[str] = []
        self.fail_commits = fail_commits

    def describe(self) -> str:
        return self.name

    def commit(self, job_id: str, commit_id: int, pending: Sequence[str]) -> None:
        if self.fail_commits:
            self.fail_commits -= 1
            raise OSError("database down")
        self.threads.append(threading.current_thread().name)
        self.calls.append(("commit", job_id, str(commit_id), *pending))

    def abort(self, job_id: str, keep: Collection[str] = ()) -> None:
        self.calls.append(("abort", job_id, *sorted(keep)))

    def pending(self, job_id: str, attempt_ids: Collection[str]) -> list[str]:
        return [f"left-by-{a}" for a in sorted(attempt_ids)]

    def initialize_global(self, job_id: str) -> None:
        self.calls.append(("initialize", job_id))


def metadata(
    checkpoint_id: int, handles: dict[int, tuple[str, ...]], earlier=()
) -> CheckpointMetadata:  # type: ignore[no-untyped-def]
    window = VertexState("win", "window", 1, {0: TaskStateSnapshot(sink_pending=handles)})
    return CheckpointMetadata(
        "job-1", "job", checkpoint_id, 0, 0, False, 128, [window], earlier_commits=earlier
    )


def committer_with(*sinks: RecordingSink) -> SinkCommitter:
    committer = SinkCommitter("job-1")
    committer.set_sinks({("win", i + 1): sink for i, sink in enumerate(sinks)})
    return committer


def test_commits_follow_checkpoint_order_on_the_committer_thread() -> None:
    parquet, postgres = RecordingSink("parquet"), RecordingSink("postgres")
    committer = committer_with(parquet, postgres)
    first = committer.commit(metadata(1, {1: ("p1",), 2: ("q1",)}))
    second = committer.commit(metadata(2, {1: ("p2",)}))
    result_within(second, 10, what="the second commit")
    assert first.done()
    assert parquet.calls == [("commit", "job-1", "1", "p1"), ("commit", "job-1", "2", "p2")]
    assert postgres.calls == [("commit", "job-1", "1", "q1")]
    committer.close()


def test_earlier_commits_named_by_a_checkpoint_go_first_under_their_own_ids() -> None:
    parquet = RecordingSink("parquet")
    committer = committer_with(parquet)
    earlier = (SinkCommit("job-0", 7, {("win", 1): ("old",)}),)
    result_within(committer.commit(metadata(9, {1: ("new",)}, earlier)), 10, what="the commit")
    assert parquet.calls == [("commit", "job-0", "7", "old"), ("commit", "job-1", "9", "new")]
    committer.close()


def test_a_failed_commit_fails_its_future_and_a_restore_commits_it_then_aborts() -> None:
    postgres = RecordingSink("postgres", fail_commits=1)
    committer = committer_with(postgres)
    failed = committer.commit(metadata(3, {1: ("a",)}))
    assert isinstance(failed.exception(timeout=10), OSError)
    later = metadata(4, {1: ("b",)}, (SinkCommit("job-1", 3, {("win", 1): ("a",)}),))
    result_within(committer.restore(later), 10, what="the restore")
    assert postgres.calls == [
        ("commit", "job-1", "3", "a"),
        ("commit", "job-1", "4", "b"),
        ("abort", "job-1"),
    ]
    committer.close()


def test_a_finished_bounded_job_lists_then_commits_its_final_checkpoint() -> None:
    parquet = RecordingSink("parquet")
    committer = committer_with(parquet)
    listed = result_within(committer.final_pending({"win": {"att-2"}}), 10, what="the listing")
    assert listed == {("win", 1): ("left-by-att-2",)}
    final = metadata(12, {}, (SinkCommit("job-1", 12, listed),))
    result_within(committer.finish(final), 10, what="the final commit")
    assert parquet.calls == [("commit", "job-1", "12", "left-by-att-2"), ("abort", "job-1")]
    committer.close()


def test_abort_keeps_what_retained_checkpoints_list() -> None:
    parquet = RecordingSink("parquet")
    committer = committer_with(parquet)
    named = (SinkCommit("job-1", 4, {("win", 1): ("uncommitted",)}),)
    result_within(committer.abort([metadata(5, {1: ("kept",)}, named)]), 10, what="the abort")
    assert parquet.calls == [("abort", "job-1", "kept", "uncommitted")]
    committer.close()


class BlockingSink(RecordingSink):
    """Commit 1 holds its thread until ``release`` is set or a commit 2 starts (at most
    ``hold`` s); records when each commit enters and leaves."""

    def __init__(self, hold: float) -> None:
        super().__init__("blocking")
        self.hold = hold
        self.release = threading.Event()
        self.entered = threading.Event()

    def commit(self, job_id: str, commit_id: int, pending: Sequence[str]) -> None:
        self.calls.append(("enter", str(commit_id)))
        self.entered.set()
        if commit_id == 1:
            self.release.wait(timeout=self.hold)
        else:
            self.release.set()  # a commit running beside commit 1 would end its hold at once
        self.calls.append(("leave", str(commit_id)))


def test_a_commit_starts_only_once_the_one_before_it_finished() -> None:
    sink = BlockingSink(hold=1.0)
    committer = committer_with(sink)
    committer.commit(metadata(1, {1: ("a",)}))
    result_within(committer.commit(metadata(2, {1: ("b",)})), 10, what="the second commit")
    assert sink.calls == [("enter", "1"), ("leave", "1"), ("enter", "2"), ("leave", "2")]
    committer.close()


def test_commits_run_on_the_thread_named_after_the_job() -> None:
    parquet = RecordingSink("parquet")
    committer = SinkCommitter("0123456789abcdef")
    committer.set_sinks({("win", 1): parquet})
    result_within(committer.commit(metadata(1, {1: ("a",)})), 10, what="the commit")
    # docs/testing.md: thread names; ThreadPoolExecutor appends _<n>
    assert re.fullmatch(r"committer-01234567_\d+", parquet.threads[0])
    committer.close()


def test_close_does_not_wait_for_a_running_commit() -> None:
    sink = BlockingSink(hold=10.0)
    committer = committer_with(sink)
    running = committer.commit(metadata(1, {1: ("a",)}))
    wait_until(sink.entered.is_set, what="the commit to start", timeout=10)
    committer.close()  # the JobMaster's main thread must not block on a sink
    assert not running.done()
    sink.release.set()
    result_within(running, 10, what="the commit after close")


def test_close_stops_the_committers_own_thread_but_not_an_executor_it_was_given() -> None:
    own = SinkCommitter("job-1")
    own.close()
    with pytest.raises(RuntimeError, match="after shutdown"):
        own.commit(metadata(1, {1: ("a",)}))
    given = ThreadPoolExecutor(1)
    committer = SinkCommitter("job-1", given)
    committer.close()
    assert result_within(given.submit(lambda: "still running"), 10, what="work") == "still running"
    given.shutdown()


def test_a_job_whose_sinks_were_never_loaded_aborts_and_restores_nothing() -> None:
    committer = SinkCommitter("job-1")  # its preparation failed before the sinks were loaded
    assert result_within(committer.abort(), 10, what="the abort") is None
    assert result_within(committer.restore(None), 10, what="the restore") is None
    committer.close()


def test_initialize_prepares_every_sink_for_the_job() -> None:
    parquet, postgres = RecordingSink("parquet"), RecordingSink("postgres")
    committer = committer_with(parquet, postgres)
    result_within(committer.initialize(), 10, what="the sinks' initialization")
    assert parquet.calls == postgres.calls == [("initialize", "job-1")]
    committer.close()


class BrokenAbortSink(RecordingSink):
    def abort(self, job_id: str, keep: Collection[str] = ()) -> None:
        raise OSError("staging directory unreachable")


def test_a_sink_that_cannot_abort_is_logged_with_its_error_and_the_others_still_abort(
    caplog: pytest.LogCaptureFixture,
) -> None:
    broken, parquet = BrokenAbortSink("postgres at db:5432"), RecordingSink("parquet")
    committer = committer_with(broken, parquet)
    with caplog.at_level(logging.ERROR, logger="millrace.runtime.jobmaster.sink_committer"):
        result_within(committer.abort(), 10, what="the abort")
    assert parquet.calls == [("abort", "job-1")]
    [record] = caplog.records
    assert record.getMessage() == "aborting postgres at db:5432 failed"
    assert record.exc_info is not None and isinstance(record.exc_info[1], OSError)
    committer.close()


def test_every_commit_is_logged_with_its_job_and_checkpoint_in_commit_order(
    caplog: pytest.LogCaptureFixture,
) -> None:
    committer = committer_with(RecordingSink("parquet"))
    earlier = (SinkCommit("job-0", 7, {("win", 1): ("old",)}),)
    with caplog.at_level(logging.INFO, logger="millrace.runtime.jobmaster.sink_committer"):
        result_within(committer.commit(metadata(9, {1: ("new",)}, earlier)), 10, what="commit")
    logged = [r.getMessage() for r in caplog.records]
    assert logged == ["job job-0: committed checkpoint 7", "job job-1: committed checkpoint 9"]
    committer.close()


def staged_in(sink: ParquetSink, job_id: str, attempt_id: str) -> str:
    written = sink.write(pa.table({"carrier": ["AA"]}), job_id, 0, 0, attempt_id)
    assert written.pending is not None
    return written.pending


def test_final_pending_lists_what_the_final_attempts_staged_in_a_real_sink(tmp_path) -> None:
    job = "0123456789abcdef0123456789abcdef"
    sink = ParquetSink(str(tmp_path / "out"))
    final = staged_in(sink, job, "attempt-final-0")
    staged_in(sink, job, "attempt-failed-0")  # an attempt restarted since: not listed
    staged_in(sink, "f" * 32, "attempt-final-0")  # another job's
    committer = SinkCommitter(job)
    committer.set_sinks({("win", 1): sink})
    listed = committer.final_pending({"win": {"attempt-final-0"}})
    assert result_within(listed, 10, what="the listing") == {("win", 1): (final,)}
    nobody = committer.final_pending({"src": {"attempt-final-0"}})  # no attempt of "win"
    assert result_within(nobody, 10, what="the listing") == {("win", 1): ()}
    committer.close()
