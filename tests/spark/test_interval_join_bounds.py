"""IntervalJoinStreamTask on small frames in the session's SparkSession: the join's bounds are
inclusive at both ends, every pair is emitted exactly once whichever input arrives first, and
each input's state is dropped exactly when the watermark passes the last time a row can match.

The task runs as in a job (its own thread, its Spark plan, its state files) but is fed exchange
files and watermarks directly, so the checks sit on the bounds: rows exactly at ``a.ts + lower``
and ``a.ts + upper`` and one millisecond outside. Oracles are plain Python, by the definitions
of Flink's interval join ("Joining", Flink docs: ``a.ts + lower <= b.ts <= a.ts + upper``, keys
equal) and of its cleanup timers: a row ``a`` of the first input can match no row to come once
the watermark is above ``a.ts + upper``, a row ``b`` of the second input once it is above
``b.ts - lower``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from millrace.api.join_operators import IntervalJoinOperator
from millrace.api.operators import SinkOperator
from millrace.config import Configuration
from millrace.runtime.deployment import InputChannelDescriptor, TaskDeploymentDescriptor
from millrace.runtime.io.partition_events import MIN_WATERMARK, DataBundle
from millrace.runtime.jobgraph import OperatorKind, SerializedOperator
from millrace.runtime.sink.sink import SinkWrite
from millrace.runtime.taskexecutor.task_environment import TaskEnvironment
from millrace.spark.exchange import window_end_range_ms
from millrace.spark.interval_join_stream_task import IntervalJoinStreamTask
from millrace.spark.windowing import KEY_GROUP, WINDOW_START
from millrace.types import (
    Address,
    AllocationId,
    ExecutionAttemptId,
    JobId,
    JobVertexId,
    ResultPartitionId,
)
from tests.waiting import WAIT, result_within

pytestmark = [pytest.mark.slow, pytest.mark.spark]

T = TypeVar("T")

LOWER_MS = -3_600_000  # between("-1 h", "30 min")
UPPER_MS = 1_800_000
T0 = 1_356_998_400_000  # 2013-01-01T00:00Z (ms)
MINUTE = 60_000
HOUR = 60 * MINUTE

Row = tuple[str, str, int]  # (key, id, event time in ms)


@dataclass
class CapturingSink:
    """Keeps every table the task stages (the sink is not what these tests check)."""

    tables: list[Any] = field(default_factory=list)

    def write(self, table: Any, job_id: Any, subtask: int, sequence: int, attempt_id: Any):
        self.tables.append(table)
        return SinkWrite(table.num_rows, None)

    def describe(self) -> str:
        return "capturing sink"


class IntervalJoinHarness:
    """An IntervalJoinStreamTask (first input: ``k, a_id, a_ms``; second: ``k, b_id, b_ms``;
    keyed by ``k``) run on its own task thread, as in a job."""

    def __init__(self, spark: Any, work: Path, max_files: int) -> None:
        self.work = work
        self.files = 0
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="interval join (1/1)")
        session: Future[Any] = Future()
        session.set_result(spark)
        self.task: IntervalJoinStreamTask = self._on_task_thread(
            lambda: self._start(session, max_files), "the task to open"
        )

    def _on_task_thread(self, fn: Callable[[], T], what: str) -> T:
        return result_within(self._thread.submit(fn), WAIT, what=what)

    def _start(self, session: Future[Any], max_files: int) -> IntervalJoinStreamTask:
        op = IntervalJoinOperator(("k",), ("k",), LOWER_MS, UPPER_MS, "_r", "interval join")
        sink = SinkOperator(CapturingSink(), "Sink: captured")
        channels = tuple(
            InputChannelDescriptor(ResultPartitionId(p), 0, Address(f"local://test/{p}"), 0, i)
            for i, p in enumerate(("a", "b"))
        )
        tdd = TaskDeploymentDescriptor(
            JobId("job"),
            "job",
            Address("local://test/jobmaster"),
            JobVertexId("join"),
            "interval join (1/1)",
            0,
            1,
            ExecutionAttemptId("attempt-1"),
            AllocationId("slot-0"),
            "millrace.spark.interval_join_stream_task:IntervalJoinStreamTask",
            (
                SerializedOperator.of(OperatorKind.WINDOW, op.name, op),
                SerializedOperator.of(OperatorKind.SINK, sink.name, sink),
            ),
            False,
            None,
            0,
            channels,
            128,
        )
        env = TaskEnvironment(
            tdd,
            Configuration({}),
            session,
            str(self.work),
            request_split=Future,
            emit=lambda subpartition, event: None,
            input_gate=None,
            checkpoint_responder=SimpleNamespace(),
        )
        task = IntervalJoinStreamTask(env)
        task.open_inputs()
        task.max_files = max_files  # invoke() reads state.compaction.files
        return task

    def _bundle(self, side: int, row: Row) -> DataBundle:
        key, ident, ms = row
        prefix = "ab"[side]
        table = pa.table(
            {
                "k": pa.array([key]),
                f"{prefix}_id": pa.array([ident]),
                f"{prefix}_ms": pa.array([ms], pa.int64()),
                WINDOW_START: pa.array([ms * 1000], pa.int64()),  # event time, µs
                KEY_GROUP: pa.array([0], pa.int32()),
            }
        )
        self.files += 1
        path = str(self.work / f"exchange-{self.files:04d}-in{side}.parquet")
        pq.write_table(table, path)
        return DataBundle(path, 1, *window_end_range_ms(table, 1))

    def step(self, first: list[Row], second: list[Row], watermark: int) -> None:
        """One turn of the task's loop: the rows arrive (one exchange file each), then the
        events at hand are taken at ``watermark`` (join, expire, compact)."""
        events = [
            (side, self._bundle(side, r)) for side, rows in enumerate((first, second)) for r in rows
        ]

        def turn() -> None:
            self.task._accept(events, watermark)
            self.task._advance(watermark)

        self._on_task_thread(turn, f"a turn at watermark {watermark}")

    def output(self) -> Counter[tuple[str, str, str]]:
        """Every pair staged in the sink, as (key, a_id, b_id), duplicates counted."""
        sink = self.task.sinks[0][1].sink
        return Counter(
            (row["k"], row["a_id"], row["b_id"]) for t in sink.tables for row in t.to_pylist()
        )

    def state(self, side: int) -> Counter[str]:
        """The ids of the rows the task keeps as state of input ``side``."""
        column = f"{'ab'[side]}_id"
        return Counter(
            ident
            for f in self.task.files[side]
            for ident in pq.read_table(f.path)[column].to_pylist()
        )

    def close(self) -> None:
        self._thread.shutdown(wait=False)


def expected_pairs(first: list[Row], second: list[Row]) -> Counter[tuple[str, str, str]]:
    """Flink's definition: equal keys and ``a.ts + lower <= b.ts <= a.ts + upper``."""
    return Counter(
        (ka, ia, ib)
        for ka, ia, ta in first
        for kb, ib, tb in second
        if ka == kb and ta + LOWER_MS <= tb <= ta + UPPER_MS
    )


def live(side: int, rows: list[Row], watermark: int) -> Counter[str]:
    """The rows that can still match a row to come at ``watermark`` (cleanup time not
    passed): ``a.ts + upper >= watermark``, ``b.ts - lower >= watermark``."""
    shift = UPPER_MS if side == 0 else -LOWER_MS
    return Counter(ident for _, ident, ms in rows if ms + shift >= watermark)


@pytest.fixture
def harness(spark, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[IntervalJoinHarness]:
    made = IntervalJoinHarness(spark, tmp_path, getattr(request, "param", 1000))
    yield made
    made.close()


def test_both_bounds_are_inclusive_and_each_pair_is_emitted_once(harness) -> None:
    """Rows of the second input exactly at ``a.ts + lower`` and ``a.ts + upper`` join, one
    millisecond outside they do not; rows arriving before and after their partners (from
    state or new) give each pair once, a duplicate row its own pair."""
    first = [("x", "a1", T0), ("y", "a2", T0 + 7)]
    early = [  # arrive with a1 and a2
        ("x", "b-lower-1ms", T0 + LOWER_MS - 1),
        ("x", "b-lower", T0 + LOWER_MS),
        ("x", "b-lower+1ms", T0 + LOWER_MS + 1),
        ("x", "b-same", T0),
        ("y", "b-y-upper", T0 + 7 + UPPER_MS),
        ("z", "b-z", T0),  # no partner
    ]
    late = [  # arrive after: joined with a1, a2 from state
        ("x", "b-upper-1ms", T0 + UPPER_MS - 1),
        ("x", "b-upper", T0 + UPPER_MS),
        ("x", "b-upper", T0 + UPPER_MS),  # the same row twice: two pairs
        ("x", "b-upper+1ms", T0 + UPPER_MS + 1),
        ("y", "b-y-upper+1ms", T0 + 7 + UPPER_MS + 1),
    ]
    after = [("x", "a3", T0 + UPPER_MS + 1)]  # joined with the rows of both batches in state
    harness.step(first, early, MIN_WATERMARK)
    harness.step([], late, MIN_WATERMARK)
    harness.step(after, [], MIN_WATERMARK)

    expected = expected_pairs(first + after, early + late)
    # the data sits on the bounds: both ends in, one millisecond outside out
    assert {("x", "a1", "b-lower"), ("x", "a1", "b-upper"), ("y", "a2", "b-y-upper")} <= set(
        expected
    )
    assert expected[("x", "a1", "b-upper")] == 2
    outside = {("x", "a1", "b-lower-1ms"), ("x", "a1", "b-upper+1ms"), ("y", "a2", "b-y-upper+1ms")}
    assert not outside & set(expected)
    assert harness.output() == expected


@pytest.mark.parametrize(
    "harness", [1000, 0], ids=["file-per-row-deleted", "compacted-every-turn"], indirect=True
)
def test_state_is_dropped_once_the_watermark_passes_its_last_match(harness) -> None:
    """After the watermark moves to W, the first input keeps exactly its rows with
    ``a.ts + upper >= W`` and the second its rows with ``b.ts - lower >= W`` (whole state
    files deleted, or rows compacted away); rows arriving after W still find every partner
    they have by the definition; a watermark past everything leaves no state."""
    w = T0 + 10 * HOUR
    first = [
        ("x", "a-gone", w - 5 * HOUR),
        ("x", "a-last-1ms", w - UPPER_MS - 1),  # cleanup time W - 1: dropped at W
        ("x", "a-last", w - UPPER_MS),  # cleanup time W: kept at W
        ("x", "a-last+1ms", w - UPPER_MS + 1),
    ]
    second = [
        ("x", "b-gone", w - 3 * HOUR),
        ("x", "b-last-1ms", w + LOWER_MS - 1),  # cleanup time W - 1: dropped at W
        ("x", "b-last", w + LOWER_MS),  # cleanup time W: kept at W
        ("x", "b-45min", w - 45 * MINUTE),  # kept by the second input's rule, not the first's
    ]
    harness.step(first, second, MIN_WATERMARK)
    assert harness.state(0) == live(0, first, MIN_WATERMARK) == Counter(r[1] for r in first)
    assert harness.state(1) == live(1, second, MIN_WATERMARK) == Counter(r[1] for r in second)

    harness.step([], [], w)
    assert harness.state(0) == live(0, first, w) == Counter({"a-last": 1, "a-last+1ms": 1})
    assert harness.state(1) == live(1, second, w) == Counter({"b-last": 1, "b-45min": 1})

    # rows after W (not late): partners found in what was kept
    first_after = [("x", "a-after", w + 10 * MINUTE)]  # matches b-45min, not b-last
    second_after = [("x", "b-after", w + 1)]  # matches a-last+1ms
    harness.step(first_after, second_after, w + 1)
    expected = expected_pairs(first + first_after, second + second_after)
    assert ("x", "a-after", "b-45min") in expected
    assert ("x", "a-last+1ms", "b-after") in expected
    assert harness.output() == expected

    end = w + 10 * HOUR
    harness.step([], [], end)
    assert harness.state(0) == live(0, first + first_after, end) == Counter()
    assert harness.state(1) == live(1, second + second_after, end) == Counter()
