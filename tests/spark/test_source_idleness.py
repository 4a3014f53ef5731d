"""A source subtask that went idle (``idleness``: no record for that long) and then reads new
records is active again (Flink's WatermarksWithIdleness): it says so with
``WatermarkStatus(active)`` before the new records' watermark, reports its own watermark to the
JobMaster's clock again instead of MAX, stays active while records keep coming, and so holds the
consumer's watermark at the minimum again: behind a faster source, the consumer's watermark
stops at the resumed source's.

The SourceStreamTask runs on its own thread with a scripted reader whose bundles carry only
their event time; the bundle's Spark plan (``_run_bundle``) is replaced by the largest event
time it would observe, so no Spark job runs. Time is the test's: the source's clock moves only
when the test moves it, so idleness comes exactly when the test asks for it. Its events go
through real ResultPartitions into a real InputGate together with a second, faster channel.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest

from millrace.api.connector.source import (
    Boundedness,
    SourceBundle,
    SourceReaderContext,
)
from millrace.api.operators import SourceOperator
from millrace.runtime.checkpoint.task_state_snapshot import TaskStateSnapshot
from millrace.runtime.deployment import InputChannelDescriptor
from millrace.runtime.io.input_gate import InputGate
from millrace.runtime.io.input_split import InputSplit, NextInputSplit, SplitState
from millrace.runtime.io.partition_events import (
    MAX_WATERMARK,
    CheckpointBarrier,
    DataBundle,
    PartitionEvent,
    Watermark,
    WatermarkStatus,
)
from millrace.runtime.io.result_partition import ResultPartition
from millrace.spark import source_stream_task
from millrace.spark.source_stream_task import SourceStreamTask
from millrace.types import (
    Address,
    JobId,
    ResultPartitionId,
)
from tests.spark.source_task_environment import source_task_environment
from tests.waiting import wait_until

WAIT = 30.0
IDLE_MS = 1_000
SPLIT = InputSplit(0, "topic/0")
IDLE_END = DataBundle("channel 0's last event while idle", 0)
RESUMED_END = DataBundle("channel 0's last event once resumed", 0)


class SourceClock:
    """The source task's monotonic clock, moved by the test only."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class ArrivingReader:
    """One split; a bundle per file the test drops into ``inbox`` (its name orders it, its
    text is the largest event time of the bundle's records)."""

    def __init__(self, inbox: Path) -> None:
        self.inbox = inbox
        self.split: InputSplit | None = None
        self.position = 0

    def add_split(self, split: InputSplit, position: int) -> None:
        self.split, self.position = split, position

    def wants_splits(self) -> bool:
        return True  # an unbounded source discovering splits: it keeps asking

    def poll(self, timeout: float) -> SourceBundle | None:
        arrived = self.inbox / f"{self.position:04d}"
        if self.split is None or not arrived.exists():
            time.sleep(min(timeout, 0.005))  # real time: the test's clock says when idle
            return None
        self.position += 1
        event_time = int(arrived.read_text())
        return SourceBundle(event_time, [SplitState(self.split, self.position)], "split")

    def snapshot(self) -> list[SplitState]:
        return [] if self.split is None else [SplitState(self.split, self.position)]

    def is_finished(self) -> bool:
        return self.split is None

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class ArrivingSource:
    inbox: str

    boundedness = Boundedness.CONTINUOUS_UNBOUNDED

    def create_reader(self, context: SourceReaderContext) -> ArrivingReader:
        return ArrivingReader(Path(self.inbox))


class PlanlessSourceTask(SourceStreamTask):
    """The SourceStreamTask with the bundle's Spark plan left out: a bundle's "frame" is the
    largest event time of its records, which the plan's observation would have found."""

    def _run_bundle(self, bundle: SourceBundle, sequence: int, watermark: int | None):
        return {state.split.split_id: bundle.frame for state in bundle.progress}


@dataclass
class Harness:
    """The source task on its own thread, what it emitted and what it told the clock service."""

    work: Path
    events: list[PartitionEvent] = field(default_factory=list)
    clocks: list[int] = field(default_factory=list)
    acks: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.inbox = self.work / "inbox"
        self.inbox.mkdir()
        self.arrived = 0
        source = SourceOperator(ArrivingSource(str(self.inbox)), "t", 0, "arriving", IDLE_MS)
        self.replies = [NextInputSplit(SPLIT, 0, position=0)]
        self.env = source_task_environment(
            source,
            self.work,
            replies=self.replies,
            events=self.events,
            responder=self,
            bundle_max_delay="5 ms",
        )
        self.ended: Future[None] = Future()

    # CheckpointResponder
    def acknowledge_checkpoint(self, checkpoint_id: int, snapshot: TaskStateSnapshot) -> None:
        self.acks.append(checkpoint_id)

    def decline_checkpoint(self, checkpoint_id: int, reason: str) -> None:
        raise AssertionError(f"declined {checkpoint_id}: {reason}")

    def report_watermark(self, watermark_ms: int) -> None:
        self.clocks.append(watermark_ms)

    def run(self) -> None:
        def invoke() -> None:
            try:
                PlanlessSourceTask(self.env).invoke()
                self.ended.set_result(None)
            except BaseException as error:
                self.ended.set_exception(error)

        threading.Thread(target=invoke, name="arriving source", daemon=True).start()

    def arrive(self, event_time: int) -> None:
        """Records up to ``event_time`` become readable (one bundle)."""
        name = f"{self.arrived:04d}"
        (self.inbox / f".{name}").write_text(str(event_time))
        (self.inbox / f".{name}").rename(self.inbox / name)
        self.arrived += 1

    def statuses(self) -> list[bool]:
        return [e.active for e in list(self.events) if isinstance(e, WatermarkStatus)]

    def checkpoint(self, checkpoint_id: int) -> None:
        """A checkpoint taken at the task's next loop turn: waiting for it proves the loop
        went round (its idleness decided) after everything before."""
        self.env.trigger_checkpoint(checkpoint_id, checkpoint_id)
        wait_until(
            lambda: checkpoint_id in self.acks,
            what=f"checkpoint {checkpoint_id} acknowledged",
            seen=lambda: self.events,
            timeout=WAIT,
        )


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> SourceClock:
    clock = SourceClock()
    fake_time = SimpleNamespace(monotonic=clock, perf_counter=time.perf_counter, sleep=time.sleep)
    monkeypatch.setattr(source_stream_task, "time", fake_time)
    return clock


@pytest.fixture
def source(tmp_path, clock) -> Iterator[Harness]:
    harness = Harness(tmp_path)
    harness.run()
    yield harness
    harness.env.cancel()
    wait_until(harness.ended.done, what="the cancelled source task to end", timeout=WAIT)


class Consumer:
    """A consumer subtask's InputGate over two real channels: 0 from the source under test,
    1 from a faster source that stays active."""

    def __init__(self) -> None:
        self.partitions = [
            ResultPartition(ResultPartitionId(f"p{i}"), JobId("job"), 1) for i in range(2)
        ]
        channels = [
            InputChannelDescriptor(ResultPartitionId(f"p{i}"), 0, Address("local://t/te"), i)
            for i in range(2)
        ]
        self.gate = InputGate(
            channels, lambda c, index: self.partitions[c.producer_index].poll(0, index)
        )
        self.taken: list[tuple[int, PartitionEvent]] = []

    def put(self, channel: int, events: list[PartitionEvent]) -> None:
        for event in events:
            self.partitions[channel].add(0, event)

    def take_all(self, channel: int, last: PartitionEvent) -> None:
        """Poll the gate until it handed over ``last`` from ``channel``."""

        def took() -> bool:
            self.taken.extend(self.gate.poll_next(0.05))
            return (channel, last) in self.taken

        wait_until(took, what=f"{last} of channel {channel}", seen=lambda: self.taken)


def test_an_idle_source_with_new_records_is_active_again_and_holds_the_minimum(
    source: Harness, clock: SourceClock
) -> None:
    consumer = Consumer()
    source.arrive(10_000)
    wait_until(lambda: Watermark(9_999) in source.events, what="the first records' watermark")
    clock.now += IDLE_MS / 1000  # no record for the idleness timeout
    wait_until(lambda: source.statuses() == [False], what="the source idle", seen=source.statuses)
    assert source.clocks[-1] == MAX_WATERMARK  # an idle source holds no clock back

    # idle: the faster source alone moves the consumer's watermark
    consumer.put(0, [*source.events, IDLE_END])
    consumer.take_all(0, IDLE_END)  # channel 0 drained before the faster source moves on
    consumer.put(1, [Watermark(15_000)])
    consumer.take_all(1, Watermark(15_000))
    assert consumer.gate.watermark == 15_000

    mark = len(source.events)
    source.arrive(20_000)  # new records for the idle source
    wait_until(lambda: Watermark(19_999) in source.events, what="the new records' watermark")
    source.checkpoint(1)  # a loop turn after the records: no idleness timeout has passed
    source.checkpoint(2)  # and one more, past the idleness decision of the first's turn
    resumed = source.events[mark:]
    statuses = [e for e in resumed if isinstance(e, WatermarkStatus)]
    assert statuses == [WatermarkStatus(True)], resumed  # active again, and it stays so
    assert resumed.index(WatermarkStatus(True)) < resumed.index(Watermark(19_999)), resumed
    # the clock service hears its own watermark again, not MAX: it holds the minimum there
    assert source.clocks[-1] != MAX_WATERMARK and source.clocks[-1] <= 19_999, source.clocks

    # the barriers stay out: the faster channel has none to align them with
    consumer.put(0, [e for e in resumed if not isinstance(e, CheckpointBarrier)] + [RESUMED_END])
    consumer.take_all(0, RESUMED_END)
    consumer.put(1, [Watermark(30_000)])
    consumer.take_all(1, Watermark(30_000))
    # behind the faster source, the consumer's watermark stops at the resumed source's
    assert consumer.gate.watermark == 19_999
