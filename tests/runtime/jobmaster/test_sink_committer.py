"""SinkCommitter: commits in checkpoint order on its own thread, an earlier checkpoint's
commit before the one that names it, each under its own id; restore commits, then aborts."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from millrace.runtime.checkpoint.checkpoint_storage import (
    CheckpointMetadata,
    SinkCommit,
    VertexState,
)
from millrace.runtime.checkpoint.task_state_snapshot import TaskStateSnapshot
from millrace.runtime.jobmaster.sink_committer import SinkCommitter
from tests.waiting import result_within


class RecordingSink:
    """Records every call; ``fail_commits`` makes that many commits raise first."""

    def __init__(self, name: str, fail_commits: int = 0) -> None:
        self.name = name
        self.calls: list[tuple[str, ...]] = []
        self.fail_commits = fail_commits

    def describe(self) -> str:
        return self.name

    def commit(self, job_id: str, commit_id: int, pending: Sequence[str]) -> None:
        if self.fail_commits:
            self.fail_commits -= 1
            raise OSError("database down")
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
