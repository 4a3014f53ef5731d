"""The SourceStreamTask's control states without Spark: asking for splits, going idle and
active again (WatermarkStatus), taking checkpoints at bundle boundaries (split positions
snapshotted, the barrier put out, the acknowledgement sent), and ending bounded input with a MAX
watermark and EndOfPartition. The reader is scripted and never produces a bundle, so no Spark
job runs; the session is a stand-in that only takes the task's job group.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from millrace.api.connector.source import Boundedness, SourceReaderContext
from millrace.api.operators import SourceOperator
from millrace.errors import TaskCancelledError
from millrace.runtime.checkpoint.task_state_snapshot import TaskStateSnapshot
from millrace.runtime.io.input_split import InputSplit, NextInputSplit, SplitState
from millrace.runtime.io.partition_events import (
    MAX_WATERMARK,
    MIN_WATERMARK,
    CheckpointBarrier,
    EndOfPartition,
    Watermark,
    WatermarkStatus,
)
from millrace.spark.source_stream_task import SourceStreamTask
from tests.spark.source_task_environment import source_task_environment
from tests.waiting import result_within, wait_until

WAIT = 30.0


class ScriptedReader:
    """Holds the splits it is given at their positions; never has records."""

    def __init__(self) -> None:
        self.splits: dict[str, tuple[InputSplit, int]] = {}

    def add_split(self, split: InputSplit, position: int) -> None:
        self.splits[split.split_id] = (split, position)

    def wants_splits(self) -> bool:
        return not self.splits

    def poll(self, timeout: float) -> None:
        time.sleep(min(timeout, 0.01))
        return None

    def snapshot(self) -> list[SplitState]:
        return [SplitState(split, position) for split, position in self.splits.values()]

    def is_finished(self) -> bool:
        return not self.splits

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class ScriptedSource:
    boundedness: Boundedness

    def create_reader(self, context: SourceReaderContext) -> ScriptedReader:
        return ScriptedReader()


@dataclass
class Harness:
    """A SourceStreamTask on its own thread, and what it said."""

    boundedness: Boundedness
    work: Path
    replies: list[NextInputSplit] = field(default_factory=list)
    events: list[Any] = field(default_factory=list)
    acks: list[tuple[int, TaskStateSnapshot]] = field(default_factory=list)
    restore: TaskStateSnapshot | None = None

    def __post_init__(self) -> None:
        source = SourceOperator(ScriptedSource(self.boundedness), None, 0, "scripted", None)
        self.env = source_task_environment(
            source,
            self.work,
            replies=self.replies,
            events=self.events,
            responder=self,
            bundle_max_delay="10 ms",
            restore=self.restore,
        )
        self.ended: Future[None] = Future()

    # CheckpointResponder
    def acknowledge_checkpoint(self, checkpoint_id: int, snapshot: TaskStateSnapshot) -> None:
        self.acks.append((checkpoint_id, snapshot))

    def decline_checkpoint(self, checkpoint_id: int, reason: str) -> None:
        raise AssertionError(f"declined {checkpoint_id}: {reason}")

    def report_watermark(self, watermark_ms: int) -> None:
        pass

    def run(self) -> None:
        def invoke() -> None:
            try:
                SourceStreamTask(self.env).invoke()
                self.ended.set_result(None)
            except BaseException as error:
                self.ended.set_exception(error)

        threading.Thread(target=invoke, name="scripted source", daemon=True).start()

    def statuses(self) -> list[bool]:
        return [e.active for e in self.events if isinstance(e, WatermarkStatus)]


@pytest.fixture
def unbounded(tmp_path) -> Iterator[Harness]:
    harness = Harness(Boundedness.CONTINUOUS_UNBOUNDED, tmp_path)
    yield harness
    harness.env.cancel()


def test_a_bounded_source_without_splits_ends_with_max_watermark_and_end_of_partition(
    tmp_path,
) -> None:
    harness = Harness(Boundedness.BOUNDED, tmp_path, [NextInputSplit(None, MAX_WATERMARK)])
    harness.env.trigger_checkpoint(1, 1000)  # taken at the first boundary
    harness.run()
    result_within(harness.ended, WAIT, what="the task to end")
    assert [(i, s.split_states) for i, s in harness.acks] == [(1, ())]
    assert harness.events[-2:] == [Watermark(MAX_WATERMARK), EndOfPartition()]
    # the watermark it starts from is its first event (its consumers deploy on it), and the
    # checkpoint triggered before it ran is taken at the first boundary, before any data
    assert harness.events[0] == Watermark(MIN_WATERMARK)
    assert isinstance(harness.events[1], CheckpointBarrier)


def test_a_restored_split_keeps_its_own_watermark_into_the_next_checkpoint(unbounded) -> None:
    split = InputSplit(0, "topic/0")
    unbounded.replies.append(NextInputSplit(split, 0, position=42, split_watermark_ms=5_000))
    unbounded.run()
    wait_until(lambda: unbounded.statuses() == [], what="the split taken", timeout=WAIT)
    unbounded.env.trigger_checkpoint(3, 5000)
    wait_until(lambda: unbounded.acks, what="the acknowledgement", timeout=WAIT)
    [(_, snapshot)] = unbounded.acks
    assert snapshot.split_states == (SplitState(split, 42, watermark_ms=5_000),)


def test_the_first_event_of_a_restored_source_is_its_restored_watermark(tmp_path) -> None:
    harness = Harness(
        Boundedness.BOUNDED,
        tmp_path,
        [NextInputSplit(None, MAX_WATERMARK)],
        restore=TaskStateSnapshot(watermark_ms=1_000_000),
    )
    harness.run()
    result_within(harness.ended, WAIT, what="the task to end")
    assert harness.events[0] == Watermark(1_000_000)


def test_without_splits_the_source_goes_idle_and_a_split_makes_it_active(unbounded) -> None:
    unbounded.run()
    wait_until(lambda: unbounded.statuses() == [False], what="the source idle", timeout=WAIT)
    split = InputSplit(0, "topic/0")
    unbounded.replies.append(NextInputSplit(split, 0, position=42))
    wait_until(
        lambda: unbounded.statuses() == [False, True],
        what="the source active again",
        seen=unbounded.statuses,
        timeout=WAIT,
    )


def test_a_checkpoint_snapshots_the_open_splits_then_puts_its_barrier_out(unbounded) -> None:
    split = InputSplit(0, "topic/0")
    unbounded.replies.append(NextInputSplit(split, 0, position=42))
    unbounded.run()
    wait_until(lambda: unbounded.statuses() == [], what="the split taken", timeout=WAIT)
    unbounded.env.trigger_checkpoint(7, 5000)
    wait_until(lambda: unbounded.acks, what="the acknowledgement", timeout=WAIT)
    [(checkpoint_id, snapshot)] = unbounded.acks
    assert checkpoint_id == 7
    # with the split's own watermark: no record yet, the bound it was assigned with (0)
    assert snapshot.split_states == (SplitState(split, 42, watermark_ms=0),)
    assert CheckpointBarrier(7, 5000) in unbounded.events


def test_cancellation_ends_the_task(unbounded) -> None:
    unbounded.run()
    wait_until(lambda: unbounded.statuses() == [False], what="the source idle", timeout=WAIT)
    unbounded.env.cancel()
    with pytest.raises(TaskCancelledError):
        result_within(unbounded.ended, WAIT, what="the cancelled task to end")
