"""The CheckpointCoordinator on a ManualClock: triggers, acknowledgements, completion, aborts.

The JobMaster's main thread, its I/O executor and its scheduled runs are played by this test
(inline), so everything is deterministic and nothing sleeps.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Executor, Future
from pathlib import Path
from typing import Any

import pytest

from millrace.clock import ManualClock
from millrace.errors import CheckpointError, RecipientUnreachableError
from millrace.runtime.checkpoint.checkpoint_coordinator import CheckpointCoordinator
from millrace.runtime.checkpoint.checkpoint_history import (
    CheckpointRecord,
    CheckpointTaskStatistics,
)
from millrace.runtime.checkpoint.checkpoint_settings import CheckpointSettings
from millrace.runtime.checkpoint.checkpoint_storage import (
    CheckpointMetadata,
    CheckpointStorage,
    task_state_path,
)
from millrace.runtime.checkpoint.pending_checkpoint import CheckpointTarget
from millrace.runtime.checkpoint.task_state_snapshot import KeyedStateHandle, TaskStateSnapshot
from millrace.runtime.deployment import TaskOperationResult
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


class ManualExecutor(Executor):
    """An I/O executor whose work runs only when the test says (``run_all``)."""

    def __init__(self) -> None:
        self.queued: list[tuple[Future[Any], Callable[[], Any]]] = []

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def]
        future: Future[Any] = Future()
        self.queued.append((future, lambda: fn(*args, **kwargs)))
        return future

    def run_all(self) -> None:
        while self.queued:
            future, work = self.queued.pop(0)
            try:
                future.set_result(work())
            except Exception as error:
                future.set_exception(error)


class MailboxExecutor(ManuallyTriggeredMainThreadExecutor):
    """The testing kit's main thread, with timers that can be made uncancellable: with
    ``cancellable`` False a cancelled run still runs, as one already in the mailbox would."""

    cancellable = True

    def schedule(self, fn: Callable[[], object], delay: float) -> Any:
        inner = super().schedule(fn, delay)
        outer = self

        class Handle:
            def cancel(self) -> None:
                if outer.cancellable:
                    inner.cancel()

        return Handle()


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

    def __init__(self, tmp_path, executor: Executor | None = None, **settings: Any) -> None:
        self.main_thread = MailboxExecutor(ManualClock(1000.0))
        self.clock = self.main_thread.clock
        self.running = True
        self.triggered: list[tuple[str, int]] = []
        self.trigger_timestamps: list[int] = []  # what the sources were told, epoch ms
        self.trigger_times: dict[int, float] = {}  # checkpoint id -> clock when triggered
        self.trigger_replies: dict[str, Callable[[], Future[Any]]] = {}  # attempt -> reply
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
                InlineExecutor() if executor is None else executor,
                self,
            ),
            self.main_thread,
        )

    def advance(self, seconds: float) -> None:
        self.main_thread.advance(seconds)

    def trigger(self, attempt: str, checkpoint_id: int, timestamp_ms: int) -> Future[Any]:
        self.triggered.append((attempt, checkpoint_id))
        self.trigger_timestamps.append(timestamp_ms)
        self.trigger_times[checkpoint_id] = self.clock.monotonic()
        reply = self.trigger_replies.get(attempt)
        if reply is not None:
            return reply()
        done: Future[Any] = Future()  # as the TaskExecutor answers trigger_checkpoint
        done.set_result(TaskOperationResult(ExecutionAttemptId(attempt), True))
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
    failure = job.coordinator.history()[-1].failure
    assert "writing the metadata failed: OSError: disk full" in failure
    monkeypatch.setattr(job.coordinator.storage, "write", real_write)
    job.advance(1.0)
    job.ack_all(3)
    assert committed_handles(job.completed[-1]) == ["a", "b"]
    assert job.completed[-1].sink_pending() == {("win", 1): ["a", "b"]}


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


def done_with(value: Any) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_result(value)
    return future


def failed_with(error: BaseException) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_exception(error)
    return future


def test_a_new_coordinator_has_no_checkpoint_and_cannot_trigger_before_every_task_runs(
    job,
) -> None:
    assert job.coordinator.latest is None
    job.running = False
    with pytest.raises(CheckpointError, match="job job: not every task is RUNNING"):
        job.coordinator.trigger()


def test_the_history_shows_each_checkpoint_in_progress_then_completed_or_failed(
    job, tmp_path
) -> None:
    state = tmp_path / "w0.parquet"
    state.write_bytes(b"rows")
    done = job.coordinator.trigger()  # the clock reads 1000.000 s
    waiting = (
        CheckpointTaskStatistics(JobVertexId("src"), 2),
        CheckpointTaskStatistics(JobVertexId("win"), 1),
    )
    assert job.coordinator.history() == [
        CheckpointRecord(1, "IN_PROGRESS", False, 1_000_000, tasks=waiting)
    ]
    assert job.trigger_timestamps == [1_000_000, 1_000_000]  # the sources' barriers carry it
    job.advance(2.5)
    for attempt in ("s0", "s1"):
        job.coordinator.acknowledge(ExecutionAttemptId(attempt), 1, TaskStateSnapshot())
    handle = KeyedStateHandle(str(state), 0, 127, rows=10, size_bytes=4096)
    job.coordinator.acknowledge(ExecutionAttemptId("w0"), 1, TaskStateSnapshot((handle,)))
    done.result(0)
    job.advance(0.5)
    job.coordinator.trigger(is_savepoint=True, savepoint_target=str(tmp_path / "mine"))
    job.advance(1.0)
    job.coordinator.decline(ExecutionAttemptId("s1"), 2, "source closed")
    location = str(tmp_path / "chk" / "job-1" / "chk-1")
    reason = "declined by s1: source closed"
    acknowledged = (  # per vertex: subtasks, acknowledged, latest at 1002.5 s, state bytes
        CheckpointTaskStatistics(JobVertexId("src"), 2, 2, 1_002_500, 0),
        CheckpointTaskStatistics(JobVertexId("win"), 1, 1, 1_002_500, 4096),
    )
    assert job.coordinator.history() == [
        CheckpointRecord(1, "COMPLETED", False, 1_000_000, 2500, 4096, location, "", acknowledged),
        CheckpointRecord(2, "FAILED", True, 1_003_000, 1000, 0, "", reason, waiting),
    ]
    assert job.coordinator.history()[0].latest_ack_ms == 1_002_500


def test_the_history_keeps_the_newest_ten_checkpoints(tmp_path) -> None:
    job = Job(tmp_path, max_concurrent=20)
    for _ in range(11):
        job.coordinator.trigger()
    assert [r.checkpoint_id for r in job.coordinator.history()] == list(range(2, 12))
    job.ack_all(11)
    job.ack_all(1)
    history = job.coordinator.history()
    assert [(r.checkpoint_id, r.status) for r in history] == [
        *((i, "IN_PROGRESS") for i in range(3, 11)),
        (11, "COMPLETED"),
        (1, "COMPLETED"),
    ]


def test_counts_add_up_completed_and_failed_checkpoints(job) -> None:
    for checkpoint_id in (1, 2):
        job.coordinator.trigger()
        job.ack_all(checkpoint_id)
    for checkpoint_id in (3, 4):
        job.coordinator.trigger()
        job.coordinator.decline(ExecutionAttemptId("w0"), checkpoint_id, "no")
    job.coordinator.complete_final({}, {}).result(0)
    assert job.coordinator.counts == {"completed": 3, "failed": 2}


def test_an_aborted_savepoint_or_checkpoint_says_which_it_was(job, tmp_path) -> None:
    savepoint = job.coordinator.trigger(is_savepoint=True, savepoint_target=str(tmp_path / "sp"))
    job.coordinator.decline(ExecutionAttemptId("w0"), 1, "no room")
    with pytest.raises(CheckpointError, match=r"^savepoint 1 aborted: declined by w0: no room$"):
        savepoint.result(0)
    checkpoint = job.coordinator.trigger()
    job.coordinator.decline(ExecutionAttemptId("w0"), 2, "no room")
    with pytest.raises(CheckpointError, match=r"^checkpoint 2 aborted: declined by w0: no room$"):
        checkpoint.result(0)


def test_an_aborted_checkpoint_is_logged_as_a_warning_with_its_reason(job, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="millrace.runtime.checkpoint"):
        job.coordinator.trigger()
        job.coordinator.decline(ExecutionAttemptId("s1"), 1, "source closed")
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "job job:" in warning and "checkpoint 1" in warning
    assert "declined by s1: source closed" in warning


def test_a_trigger_that_cannot_be_delivered_declines_the_checkpoint(job) -> None:
    gone = RecipientUnreachableError("tcp://127.0.0.1:6122/taskmanager-1", "connection refused")
    job.trigger_replies["s1"] = lambda: failed_with(gone)
    done = job.coordinator.trigger()
    with pytest.raises(CheckpointError, match=r"declined by s1: trigger not delivered: .*refused"):
        done.result(0)


def test_a_trigger_the_task_executor_refuses_declines_the_checkpoint(job) -> None:
    refusal = TaskOperationResult(ExecutionAttemptId("s0"), False, "no such task on tm-1")
    job.trigger_replies["s0"] = lambda: done_with(refusal)
    done = job.coordinator.trigger()
    with pytest.raises(
        CheckpointError, match=r"declined by s0: trigger not delivered: no such task on tm-1$"
    ):
        done.result(0)


def test_min_pause_holds_the_next_periodic_checkpoint_back(tmp_path) -> None:
    job = Job(tmp_path, min_pause=1.5)
    job.coordinator.start()
    job.advance(1.5)  # checkpoint 1 is triggered at 1001.0
    job.ack_all(1)  # and completes at 1001.5: none before 1003.0
    job.advance(3.0)
    assert job.trigger_times == {1: 1001.0, 2: 1003.0}


def test_interval_zero_schedules_nothing_but_savepoints_still_work(tmp_path) -> None:
    job = Job(tmp_path, interval=0.0)
    job.coordinator.start()
    assert job.main_thread.scheduled == 0
    done = job.coordinator.trigger(is_savepoint=True, savepoint_target=str(tmp_path / "sp"))
    job.ack_all(1)
    assert done.result(0).is_savepoint


def test_stopping_twice_is_fine_and_leaves_no_timer(job) -> None:
    job.coordinator.start()
    job.coordinator.stop("failover")
    job.coordinator.stop("the job ended")
    assert job.main_thread.scheduled == 0


def test_a_periodic_trigger_already_queued_when_the_coordinator_stopped_does_nothing(
    job,
) -> None:
    job.main_thread.cancellable = False  # the periodic run was in the mailbox when stop() ran
    job.coordinator.start()
    job.coordinator.stop("failover")
    job.advance(1.0)
    job.coordinator.stop("the job ended")
    assert job.triggered == [] and job.coordinator.history() == []


def test_a_checkpoint_that_ended_leaves_no_timer_behind(job) -> None:
    job.coordinator.trigger()
    job.ack_all(1)
    job.coordinator.trigger()
    job.coordinator.decline(ExecutionAttemptId("w0"), 2, "no")
    assert job.main_thread.scheduled == 0  # neither checkpoint's timeout is scheduled any more


def test_a_timeout_that_fires_after_its_checkpoint_completed_changes_nothing(tmp_path) -> None:
    job = Job(tmp_path, timeout=5.0)
    job.main_thread.cancellable = False  # the timeout's run was already in the mailbox
    done = job.coordinator.trigger()
    job.ack_all(1)
    job.advance(6.0)
    assert done.result(0).checkpoint_id == 1
    assert [r.status for r in job.coordinator.history()] == ["COMPLETED"]


def test_a_checkpoint_whose_metadata_is_being_written_is_neither_declined_nor_stopped(
    tmp_path,
) -> None:
    io = ManualExecutor()
    job = Job(tmp_path, executor=io, timeout=5.0)
    job.main_thread.cancellable = False
    done = job.coordinator.trigger()
    job.ack_all(1)
    assert job.coordinator.finalizing  # a restore waits for it (JobMaster)
    job.coordinator.decline(ExecutionAttemptId("w0"), 1, "too late")
    job.advance(6.0)  # its timeout, already queued, fires
    job.coordinator.stop("failover")
    io.run_all()
    job.main_thread.trigger_all()
    assert done.result(0).checkpoint_id == 1 and not job.coordinator.finalizing
    assert job.completed == [done.result(0)]


def test_acknowledgements_and_declines_not_of_the_checkpoints_tasks_are_ignored(job) -> None:
    done = job.coordinator.trigger()
    zombie = ExecutionAttemptId("w0-of-an-earlier-attempt")
    job.coordinator.decline(zombie, 1, "a zombie")
    job.coordinator.acknowledge(zombie, 1, TaskStateSnapshot())
    job.coordinator.decline(ExecutionAttemptId("w0"), 7, "a checkpoint nobody triggered")
    for attempt in ("s0", "s1"):
        job.coordinator.acknowledge(ExecutionAttemptId(attempt), 1, TaskStateSnapshot())
    assert not done.done()
    job.coordinator.acknowledge(ExecutionAttemptId("w0"), 1, TaskStateSnapshot())
    assert done.result(0).checkpoint_id == 1


def test_an_aborted_checkpoint_deletes_the_state_its_tasks_wrote(job, tmp_path) -> None:
    job.coordinator.trigger()
    written = Path(task_state_path(str(tmp_path / "chk"), "job-1", 1, "win", 0, "0a1b2c3d4e5f"))
    written.parent.mkdir(parents=True)
    written.write_bytes(b"unfired windows")
    job.coordinator.decline(ExecutionAttemptId("s0"), 1, "no")
    assert not (tmp_path / "chk" / "job-1" / "chk-1").exists()


def test_carried_sink_data_keeps_the_position_of_its_sink(job) -> None:
    job.coordinator.start()
    job.advance(1.0)
    two_sinks = TaskStateSnapshot(sink_pending={1: ("a",), 2: ("p",)})
    job.coordinator.acknowledge(ExecutionAttemptId("w0"), 1, two_sinks)
    job.coordinator.decline(ExecutionAttemptId("s0"), 1, "no")
    job.advance(1.0)
    for attempt in ("s0", "s1"):
        job.coordinator.acknowledge(ExecutionAttemptId(attempt), 2, TaskStateSnapshot())
    later = TaskStateSnapshot(sink_pending={2: ("q",), 3: ("r",)})
    job.coordinator.acknowledge(ExecutionAttemptId("w0"), 2, later)
    assert job.completed[-1].sink_pending() == {
        ("win", 1): ["a"],
        ("win", 2): ["p", "q"],
        ("win", 3): ["r"],
    }


def test_late_acknowledgements_count_for_the_sixteen_latest_aborted_checkpoints(
    tmp_path,
) -> None:
    job = Job(tmp_path, max_concurrent=20)
    for checkpoint_id in range(1, 18):
        job.coordinator.trigger()
        job.coordinator.decline(ExecutionAttemptId("s0"), checkpoint_id, "no")
    job.coordinator.acknowledge(ExecutionAttemptId("w0"), 1, staged("forgotten"))
    job.coordinator.acknowledge(ExecutionAttemptId("w0"), 2, staged("late"))
    assert job.coordinator.carried_sink_handles() == 1


def test_a_completed_checkpoint_records_its_job_vertices_and_times(job) -> None:
    done = job.coordinator.trigger()
    job.advance(0.25)
    job.ack_all(1)
    metadata = done.result(0)
    for m in (metadata, job.coordinator.storage.read(metadata.location)):
        assert (m.job_id, m.job_name, m.max_parallelism, m.is_savepoint) == (
            "job-1",
            "job",
            128,
            False,
        )
        assert (m.timestamp_ms, m.completed_ms) == (1_000_000, 1_000_250)
        assert [(v.vertex_id, v.name, v.parallelism) for v in m.vertices] == [
            ("src", "source", 2),
            ("win", "window", 1),
        ]


def test_the_final_checkpoint_is_a_retained_checkpoint_of_the_job(job, tmp_path) -> None:
    job.advance(2.0)
    written = job.coordinator.complete_final({JobVertexId("src"): ("f1",)}, {("win", 1): ("z",)})
    final = written.result(0)
    assert (final.job_id, final.job_name, final.max_parallelism, final.is_savepoint) == (
        "job-1",
        "job",
        128,
        False,
    )
    assert final.timestamp_ms == final.completed_ms == 1_002_000
    assert [(v.name, v.parallelism) for v in final.vertices] == [("source", 2), ("window", 1)]
    assert final.location == str(tmp_path / "chk" / "job-1" / "chk-1")
    assert [(c.job_id, c.checkpoint_id) for c in final.commits()] == [("job-1", 1)]
    assert job.coordinator.next_checkpoint_id == 2
    assert job.coordinator.unconfirmed_commits == [1]
    job.coordinator.commit_confirmed(final)
    job.coordinator.commit_confirmed(final)  # a replayed commit is confirmed again
    assert job.coordinator.unconfirmed_commits == []


def test_a_final_checkpoint_that_cannot_be_written_fails_its_future(job, monkeypatch) -> None:
    def broken(*args: Any) -> Any:
        raise OSError("disk full")

    monkeypatch.setattr(job.coordinator.storage, "write", broken)
    written = job.coordinator.complete_final({}, {})
    with pytest.raises(OSError, match="disk full"):
        written.result(0)
    assert job.coordinator.retained() == []


def test_discarding_the_retained_checkpoints_deletes_them(tmp_path) -> None:
    job = Job(tmp_path, num_retained=2)
    for checkpoint_id in (1, 2):
        job.coordinator.trigger()
        job.ack_all(checkpoint_id)
    job.coordinator.discard_retained()
    assert job.coordinator.retained() == []
    assert not (tmp_path / "chk" / "job-1" / "chk-1").exists()
    assert not (tmp_path / "chk" / "job-1" / "chk-2").exists()


def test_a_trigger_refused_without_a_description_says_refused(job) -> None:
    class Refusal:  # a reply that has a success flag and nothing else
        success = False

    job.trigger_replies["s0"] = lambda: done_with(Refusal())
    done = job.coordinator.trigger()
    with pytest.raises(CheckpointError, match=r"declined by s0: trigger not delivered: refused$"):
        done.result(0)


def test_a_trigger_reply_without_a_success_flag_counts_as_delivered(job) -> None:
    job.trigger_replies["s0"] = lambda: done_with(None)  # an RPC that returns nothing
    done = job.coordinator.trigger()
    job.ack_all(1)
    assert done.result(0).checkpoint_id == 1


def test_a_decline_names_the_first_eight_characters_of_the_attempt(job) -> None:
    attempt = ExecutionAttemptId("0123456789abcdef")
    job.checkpoint_targets = lambda: [CheckpointTarget(attempt, JobVertexId("win"), 0)]
    done = job.coordinator.trigger()
    job.coordinator.decline(attempt, 1, "no room")
    with pytest.raises(CheckpointError, match=r"declined by 01234567: no room$"):
        done.result(0)


def test_a_checkpoints_life_is_logged_with_its_job_id_and_location(job, caplog) -> None:
    with caplog.at_level(logging.DEBUG, logger="millrace.runtime.checkpoint"):
        job.running = False
        job.coordinator.start()
        job.advance(1.0)  # a periodic trigger that cannot start
        job.running = True
        job.coordinator.stop("test")
        done = job.coordinator.trigger()
        job.advance(0.25)
        job.ack_all(1)
        job.coordinator.acknowledge(ExecutionAttemptId("w0"), 1, TaskStateSnapshot())
        job.coordinator.trigger()
        job.coordinator.decline(ExecutionAttemptId("s0"), 2, "no")
        job.coordinator.acknowledge(ExecutionAttemptId("w0"), 2, staged("late"))  # carried
        final = job.coordinator.complete_final({}, {}).result(0)
    completed = done.result(0)
    assert [r.getMessage() for r in caplog.records] == [
        "job job: no checkpoint now: job job: not every task is RUNNING",
        "job job: triggering checkpoint 1",
        f"job job: checkpoint 1 complete in 250 ms ({completed.state_size_bytes} bytes of state)"
        f" at {completed.location}",
        "ignoring acknowledgement of checkpoint 1 by w0",
        "job job: triggering checkpoint 2",
        "job job: checkpoint 2 aborted: declined by s0: no",
        f"job job: final checkpoint 3 at {final.location}",
    ]
    assert job.coordinator.carried_sink_handles() == 1
