"""The CheckpointCoordinator on a ManualClock: triggers, acknowledgements, completion, aborts.

The JobMaster's main thread, its I/O executor and its scheduled runs are played by this test
(inline), so everything is deterministic and nothing sleeps.
"""

from __future__ import annotations

from concurrent.futures import Executor, Future
from typing import Any

import pytest

from millrace.clock import ManualClock
from millrace.errors import CheckpointError
from millrace.runtime.checkpoint.checkpoint_coordinator import CheckpointCoordinator
from millrace.runtime.checkpoint.checkpoint_settings import CheckpointSettings
from millrace.runtime.checkpoint.checkpoint_storage import CheckpointMetadata, CheckpointStorage
from millrace.runtime.checkpoint.pending_checkpoint import CheckpointTarget
from millrace.runtime.checkpoint.task_state_snapshot import TaskStateSnapshot
from millrace.runtime.io.input_split import InputSplit, SplitState
from millrace.runtime.jobgraph import JobGraph, JobVertex
from millrace.testing import ManuallyTriggeredMainThreadExecutor
from millrace.types import ExecutionAttemptId, JobVertexId


class InlineExecutor(Executor):
    def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def]
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as error:
            future.set_exception(error)
        return future


class Settled:
    """The coordinator, with the main thread's queued work run after every call (what the
    JobMaster's main thread does between two messages)."""

    def __init__(self, target: CheckpointCoordinator, main_thread: Any) -> None:
        self._target = target
        self._main_thread = main_thread

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._target, name)
        if not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            result = attribute(*args, **kwargs)
            self._main_thread.trigger_all()
            return result

        return call


class Job:
    """Plays the JobMaster: its tasks, its main thread (the testing kit's manually triggered
    executor on a ManualClock), the completed checkpoints."""

    def __init__(self, tmp_path, **settings: Any) -> None:
        self.main_thread = ManuallyTriggeredMainThreadExecutor(ManualClock(1000.0))
        self.clock = self.main_thread.clock
        self.running = True
        self.triggered: list[tuple[str, int]] = []
        self.completed: list[CheckpointMetadata] = []
        self.unassigned: tuple[SplitState, ...] = ()  # the SourceCoordinator's held splits
        source = JobVertex("source", 2, "m:S", (), True, "src")
        window = JobVertex("window", 1, "m:W", (), False, "win")
        self.graph = JobGraph("job", [source, window], [], 128, "job-1")
        self.coordinator = Settled(
            CheckpointCoordinator(
                self.graph,
                CheckpointSettings(**{"interval": 1.0, **settings}),
                CheckpointStorage(str(tmp_path / "chk"), str(tmp_path / "sp")),
                self.main_thread,
                InlineExecutor(),
                self,
            ),
            self.main_thread,
        )

    def advance(self, seconds: float) -> None:
        self.main_thread.advance(seconds)

    def trigger(self, attempt: str, checkpoint_id: int, timestamp_ms: int) -> Future[Any]:
        self.triggered.append((attempt, checkpoint_id))
        done: Future[Any] = Future()
        done.set_result(None)
        return done

    def checkpoint_targets(self) -> list[CheckpointTarget] | None:
        if not self.running:
            return None
        return [
            CheckpointTarget(
                ExecutionAttemptId("s0"),
                JobVertexId("src"),
                0,
                lambda c, t: self.trigger("s0", c, t),
            ),
            CheckpointTarget(
                ExecutionAttemptId("s1"),
                JobVertexId("src"),
                1,
                lambda c, t: self.trigger("s1", c, t),
            ),
            CheckpointTarget(ExecutionAttemptId("w0"), JobVertexId("win"), 0),
        ]

    def checkpoint_completed(self, metadata: CheckpointMetadata) -> None:
        self.completed.append(metadata)

    def restored_finished_splits(self, vertex_id: JobVertexId) -> tuple[str, ...]:
        return ("restored-split",) if vertex_id == "src" else ()

    def unassigned_splits(self, vertex_id: JobVertexId) -> tuple[SplitState, ...]:
        return self.unassigned if vertex_id == "src" else ()

    def ack_all(self, checkpoint_id: int) -> None:
        for attempt in ("s0", "s1", "w0"):
            self.coordinator.acknowledge(
                ExecutionAttemptId(attempt),
                checkpoint_id,
                TaskStateSnapshot(watermark_ms=checkpoint_id),
            )


@pytest.fixture
def job(tmp_path) -> Job:
    return Job(tmp_path)


def test_periodic_checkpoints_trigger_the_sources_only_when_every_task_runs(job) -> None:
    job.running = False
    job.coordinator.start()
    job.advance(2.5)
    assert job.triggered == []
    job.running = True
    job.advance(1.0)
    assert job.triggered == [("s0", 1), ("s1", 1)]


def test_all_acknowledgements_complete_a_checkpoint_with_durable_metadata(job, tmp_path) -> None:
    done = job.coordinator.trigger()
    job.ack_all(1)
    metadata = done.result(0)
    assert (tmp_path / "chk" / "job-1" / "chk-1" / "_metadata").exists()
    assert job.completed == [metadata]
    assert metadata.vertex("win").subtasks[0].watermark_ms == 1
    assert metadata.vertex("src").finished_splits == ("restored-split",)
    assert job.coordinator.latest == metadata


def test_restored_splits_not_yet_handed_out_are_taken_at_the_trigger(job) -> None:
    held = (SplitState(InputSplit(1, "topic/1"), 80_000),)
    job.unassigned = held
    done = job.coordinator.trigger()
    job.unassigned = ()  # handed out after the trigger; the subtask snapshotted before asking
    job.ack_all(1)
    assert done.result(0).vertex("src").unassigned_splits == held
    assert done.result(0).vertex("win").unassigned_splits == ()


def test_only_the_newest_checkpoints_are_retained(tmp_path) -> None:
    job = Job(tmp_path, num_retained=2)
    for checkpoint_id in (1, 2, 3):
        job.coordinator.trigger()
        job.ack_all(checkpoint_id)
    assert [c.checkpoint_id for c in job.coordinator.retained()] == [2, 3]
    assert not (tmp_path / "chk" / "job-1" / "chk-1").exists()
    assert (tmp_path / "chk" / "job-1" / "chk-3").exists()


def test_a_declined_checkpoint_is_aborted_and_late_acknowledgements_are_ignored(job) -> None:
    done = job.coordinator.trigger()
    job.coordinator.decline(ExecutionAttemptId("w0"), 1, "cannot")
    with pytest.raises(CheckpointError, match="declined"):
        done.result(0)
    job.ack_all(1)
    assert job.completed == []
    assert job.coordinator.counts == {"completed": 0, "failed": 1}


def test_a_checkpoint_not_complete_within_the_timeout_is_aborted(tmp_path) -> None:
    job = Job(tmp_path, timeout=5.0)
    done = job.coordinator.trigger()
    job.advance(4.0)
    assert not done.done()
    job.advance(2.0)
    with pytest.raises(CheckpointError, match="not complete within 5 s"):
        done.result(0)


def test_no_more_than_max_concurrent_checkpoints_are_in_flight(job) -> None:
    job.coordinator.start()
    job.advance(3.5)  # three intervals, no acknowledgement
    assert [c for _, c in job.triggered] == [1, 1]
    assert job.coordinator.in_progress == 1


def test_stopping_aborts_pending_checkpoints_and_ids_continue_after_a_restore(job) -> None:
    done = job.coordinator.trigger()
    job.coordinator.stop("failover")
    with pytest.raises(CheckpointError, match="failover"):
        done.result(0)
    restored = CheckpointMetadata("job-1", "job", 41, 0, 0, False, 128, [])
    job.coordinator.restore(restored)
    assert job.coordinator.latest == restored
    job.coordinator.trigger()
    assert job.triggered[-1] == ("s1", 42)


def test_a_savepoint_is_copied_and_its_checkpoint_still_commits(job, tmp_path) -> None:
    done = job.coordinator.trigger(is_savepoint=True, savepoint_target=str(tmp_path / "mine"))
    job.ack_all(1)
    savepoint = done.result(0)
    assert savepoint.is_savepoint and savepoint.location.startswith(str(tmp_path / "mine"))
    assert job.completed[0].checkpoint_id == 1 and not job.completed[0].is_savepoint


def staged(*handles: str) -> TaskStateSnapshot:
    """A window task's acknowledgement with sink data staged at chain position 1."""
    return TaskStateSnapshot(sink_pending={1: handles})


def committed_handles(metadata: CheckpointMetadata) -> list[str]:
    return sorted(h for hs in metadata.sink_pending().values() for h in hs)


def test_sink_data_of_a_declined_checkpoint_is_committed_with_the_next_one(job) -> None:
    job.coordinator.start()
    job.advance(1.0)
    job.coordinator.acknowledge(ExecutionAttemptId("w0"), 1, staged("a", "b"))
    job.coordinator.decline(ExecutionAttemptId("s0"), 1, "sink pre-commit failed")
    assert job.completed == []
    assert job.coordinator.carried_sink_handles() == 2
    job.advance(1.0)
    for attempt in ("s0", "s1"):
        job.coordinator.acknowledge(ExecutionAttemptId(attempt), 2, TaskStateSnapshot())
    job.coordinator.acknowledge(ExecutionAttemptId("w0"), 2, staged("c"))
    assert [m.checkpoint_id for m in job.completed] == [2]
    assert committed_handles(job.completed[0]) == ["a", "b", "c"]
    assert job.coordinator.carried_sink_handles() == 0


def test_a_late_acknowledgement_of_an_expired_checkpoint_hands_over_its_sink_data(
    tmp_path,
) -> None:
    job = Job(tmp_path, timeout=0.5)
    job.coordinator.start()
    job.advance(1.0)
    for attempt in ("s0", "s1"):
        job.coordinator.acknowledge(ExecutionAttemptId(attempt), 1, TaskStateSnapshot())
    job.advance(0.6)  # expires: the window task is still busy with its pre-commit
    assert job.coordinator.history()[-1].status == "FAILED"
    assert "not complete within 0.5 s" in job.coordinator.history()[-1].failure
    job.coordinator.acknowledge(ExecutionAttemptId("w0"), 1, staged("late"))
    job.advance(0.4)
    job.ack_all(2)
    assert committed_handles(job.completed[-1]) == ["late"]


def test_a_failover_drops_what_aborted_checkpoints_carried(job) -> None:
    job.coordinator.start()
    job.advance(1.0)
    job.coordinator.acknowledge(ExecutionAttemptId("w0"), 1, staged("a"))
    job.coordinator.decline(ExecutionAttemptId("s1"), 1, "no")
    job.coordinator.stop("failover")  # the restore aborts every staged data it does not list
    assert job.coordinator.carried_sink_handles() == 0
    job.coordinator.acknowledge(ExecutionAttemptId("w0"), 1, staged("zombie"))
    assert job.coordinator.carried_sink_handles() == 0
    job.coordinator.start()
    job.advance(1.0)
    job.ack_all(2)
    assert committed_handles(job.completed[-1]) == []


def test_carried_sink_data_survives_a_metadata_write_that_fails(job, monkeypatch) -> None:
    job.coordinator.start()
    job.advance(1.0)
    job.coordinator.acknowledge(ExecutionAttemptId("w0"), 1, staged("a"))
    job.coordinator.decline(ExecutionAttemptId("s1"), 1, "no")
    real_write = job.coordinator.storage.write

    def broken(*args: Any) -> Any:
        raise OSError("disk full")

    monkeypatch.setattr(job.coordinator.storage, "write", broken)
    job.advance(1.0)
    job.coordinator.acknowledge(ExecutionAttemptId("w0"), 2, staged("b"))
    for attempt in ("s0", "s1"):
        job.coordinator.acknowledge(ExecutionAttemptId(attempt), 2, TaskStateSnapshot())
    assert job.completed == [] and job.coordinator.carried_sink_handles() == 2
    monkeypatch.setattr(job.coordinator.storage, "write", real_write)
    job.advance(1.0)
    job.ack_all(3)
    assert committed_handles(job.completed[-1]) == ["a", "b"]


def test_a_checkpoint_names_the_earlier_commits_not_confirmed_yet(job) -> None:
    job.coordinator.start()
    job.advance(1.0)
    for attempt in ("s0", "s1"):
        job.coordinator.acknowledge(ExecutionAttemptId(attempt), 1, TaskStateSnapshot())
    job.coordinator.acknowledge(ExecutionAttemptId("w0"), 1, staged("a"))
    assert job.coordinator.unconfirmed_commits == [1]  # its commit has not run (or failed)
    job.advance(1.0)
    job.ack_all(2)  # nothing staged: 2 commits nothing of its own, but names 1
    second = job.completed[-1]
    assert [(c.checkpoint_id, committed_handles_of(c)) for c in second.commits()] == [(1, ["a"])]
    job.coordinator.commit_confirmed(second)
    assert job.coordinator.unconfirmed_commits == []
    job.advance(1.0)
    job.ack_all(3)
    assert job.completed[-1].commits() == []


def test_a_confirmed_commit_is_not_named_again(job) -> None:
    job.coordinator.start()
    job.advance(1.0)
    for attempt in ("s0", "s1"):
        job.coordinator.acknowledge(ExecutionAttemptId(attempt), 1, TaskStateSnapshot())
    job.coordinator.acknowledge(ExecutionAttemptId("w0"), 1, staged("a"))
    job.coordinator.commit_confirmed(job.completed[-1])
    job.advance(1.0)
    job.ack_all(2)
    assert job.completed[-1].earlier_commits == ()


def test_a_restore_commits_what_was_unconfirmed_so_the_list_starts_empty(job) -> None:
    job.coordinator.start()
    job.advance(1.0)
    for attempt in ("s0", "s1"):
        job.coordinator.acknowledge(ExecutionAttemptId(attempt), 1, TaskStateSnapshot())
    job.coordinator.acknowledge(ExecutionAttemptId("w0"), 1, staged("a"))
    job.coordinator.stop("failover")
    job.coordinator.restore(job.completed[-1])
    assert job.coordinator.unconfirmed_commits == []


def committed_handles_of(commit: Any) -> list[str]:
    return sorted(h for hs in commit.pending.values() for h in hs)


def test_the_final_checkpoint_finishes_every_split_and_owes_the_last_staged_data(job) -> None:
    job.coordinator.start()
    job.advance(1.0)
    for attempt in ("s0", "s1"):
        job.coordinator.acknowledge(ExecutionAttemptId(attempt), 1, TaskStateSnapshot())
    job.coordinator.acknowledge(ExecutionAttemptId("w0"), 1, staged("a"))  # not confirmed
    job.coordinator.stop("the job finished")
    written = job.coordinator.complete_final(  # "a" is staged still: its commit did not run
        {JobVertexId("src"): ("f1", "f2")}, {("win", 1): ("a", "last")}
    )
    final = written.result(timeout=0)
    assert final.checkpoint_id == 2
    assert final.vertex("src").finished_splits == ("f1", "f2")
    assert all(not v.subtasks for v in final.vertices)  # no state: nothing to read again
    assert [(c.checkpoint_id, committed_handles_of(c)) for c in final.commits()] == [
        (1, ["a"]),
        (2, ["last"]),
    ]
    assert job.coordinator.retained()[-1] == final  # kept if its commit fails for good
    assert job.coordinator.storage.read(final.location) == final
