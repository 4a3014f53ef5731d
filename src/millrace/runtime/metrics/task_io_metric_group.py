"""TaskIOMetricGroup: what one running task measures about itself (Flink's TaskIOMetricGroup).

The task's counters live in its :class:`~millrace.runtime.executiongraph.IOMetrics`; this
group adds the time accounting and publishes immutable :class:`TaskMetricsSnapshot`s that
other threads (the TaskManager's metric query service and Prometheus reporter) read.

Time accounting (Flink's busy/idle/back-pressured time, FLIP-27 and FLINK-14967):

* **idle**: the task waits for input: a source polling its reader without getting a bundle,
  or asking the JobMaster for splits; a keyed task waiting on its input gate (alignment
  included);
* **back-pressured**: the task waits for room downstream: a source whose output channels'
  flow-control windows are full (seed 001's AckRequest/Ack,
  ``TaskEnvironment.wait_for_output_room``, timed by :meth:`TaskIOMetricGroup.back_pressured`
  in steps of 50 ms, so a long wait shows while it lasts); 0 with flow control off;
* **busy**: the rest of the time since the task became RUNNING (Flink's accumulated busy
  time is computed the same way): Spark jobs of bundles and firings, state snapshots,
  pre-commits, bookkeeping.

Rates follow Flink's views: ``numRecordsIn/OutPerSecond`` average the counters over the last
60 s (Flink's MeterView), the time-per-second values over the last 5 s (Flink's TimerGauge
update interval); both are computed from the samples taken at each progress report (about
once a second) and hold 0 until a second sample exists.
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from millrace.runtime.executiongraph import IOMetrics
from millrace.runtime.metrics.operator_metric_group import OperatorMetricGroup

__all__ = ["NO_WATERMARK", "TaskIOMetricGroup", "TaskMetricsSnapshot"]

NO_WATERMARK = -(2**63)  # Flink's Long.MIN_VALUE: no watermark received yet
RATE_WINDOW = 60.0  # seconds: numRecordsIn/OutPerSecond (Flink's MeterView default)
TIME_WINDOW = 5.0  # seconds: busy/idle/backPressuredTimeMsPerSecond (Flink's view interval)
_SUBTASK_SUFFIX = re.compile(r" \(\d+/\d+\)$")


@dataclass(frozen=True)
class TaskMetricsSnapshot:
    """One task's metrics at one moment (immutable; crosses threads and processes).

    Attributes:
        job_id, job_name: The job.
        vertex_id: The JobVertexId (Flink's ``task_id`` label).
        task_name: The vertex's name (without the subtask suffix).
        subtask_index: Which subtask (0-based).
        attempt_id: The Execution attempt (Flink's ``task_attempt_id``).
        records_in, records_out, dead_letters, late_records, bundles: Counters.
        busy_ms, idle_ms, backpressured_ms: Accumulated ms (see the module docstring).
        records_in_per_second, records_out_per_second: 60 s averages.
        busy_ms_per_second, idle_ms_per_second, backpressured_ms_per_second: 5 s averages,
            each in 0..1000.
        current_input_watermark_ms: The last watermark the task received (a source: the one
            it emitted), epoch ms; ``NO_WATERMARK`` before the first.
        timestamp_ms: When the snapshot was taken, epoch ms.
        operator_names: The chain's operators in order, side outputs left out (the names the
            vertex name joins with `` -> ``); empty if unknown.
        current_output_watermark_ms: The last watermark the task sent downstream, epoch ms;
            ``NO_WATERMARK`` before the first (and always for a chain without an output
            partition, or one that forwards no watermarks).
        head_operator_metrics: The chain's head operator's own gauges (its
            :class:`OperatorMetricGroup`, e.g. a Kafka reader's consumer lag), ``(name,
            value)`` sorted by name.
    """

    job_id: str
    job_name: str
    vertex_id: str
    task_name: str
    subtask_index: int
    attempt_id: str
    records_in: int = 0
    records_out: int = 0
    dead_letters: int = 0
    late_records: int = 0
    bundles: int = 0
    busy_ms: int = 0
    idle_ms: int = 0
    backpressured_ms: int = 0
    records_in_per_second: float = 0.0
    records_out_per_second: float = 0.0
    busy_ms_per_second: float = 0.0
    idle_ms_per_second: float = 0.0
    backpressured_ms_per_second: float = 0.0
    current_input_watermark_ms: int = NO_WATERMARK
    timestamp_ms: int = 0
    operator_names: tuple[str, ...] = ()
    current_output_watermark_ms: int = NO_WATERMARK
    head_operator_metrics: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class _Sample:
    at: float  # monotonic seconds
    records_in: int
    records_out: int
    busy_ms: int
    idle_ms: int
    backpressured_ms: int


class TaskIOMetricGroup:
    """Time accounting and snapshots of one task.

    Args:
        job_id, job_name, vertex_id, task_name, subtask_index, attempt_id: Its identity.
        counters: The task's IOMetrics, updated by the task; busy/idle/back-pressured ms are
            written into it by :meth:`sync`.
        clock: Monotonic seconds (tests pass a fake).
        operator_names: The chain's operator names, in order, side outputs left out.

    Attributes:
        head_operator: The chain's head operator's :class:`OperatorMetricGroup` (a source
            reader's gauges), copied into each snapshot by :meth:`sync`.

    Threading:
        ``start``, ``idle``, ``back_pressured``, ``sync``, ``head_operator`` and the
        ``current_input/output_watermark_ms`` attributes on the task thread;
        :attr:`snapshot` is read from any thread (an immutable value replaced as a whole).
    """

    def __init__(
        self,
        job_id: str,
        job_name: str,
        vertex_id: str,
        task_name: str,
        subtask_index: int,
        attempt_id: str,
        counters: IOMetrics,
        clock: Callable[[], float] = time.monotonic,
        operator_names: Sequence[str] = (),
    ) -> None:
        self.counters = counters
        self._clock = clock
        self._started: float | None = None
        self._idle = 0.0
        self._back_pressured = 0.0
        self._samples: deque[_Sample] = deque()
        self.current_input_watermark_ms = NO_WATERMARK
        self.current_output_watermark_ms = NO_WATERMARK
        self.head_operator = OperatorMetricGroup()
        self.snapshot = TaskMetricsSnapshot(
            job_id,
            job_name,
            vertex_id,
            _SUBTASK_SUFFIX.sub("", task_name),
            subtask_index,
            attempt_id,
            operator_names=tuple(operator_names),
        )

    @property
    def attempt_id(self) -> str:
        return self.snapshot.attempt_id

    def start(self) -> None:
        """The task became RUNNING: busy time counts from now."""
        if self._started is None:
            self._started = self._clock()

    @contextmanager
    def idle(self) -> Iterator[None]:
        """Time the body as idle (waiting for input or splits)."""
        began = self._clock()
        try:
            yield
        finally:
            self._idle += self._clock() - began

    @contextmanager
    def back_pressured(self) -> Iterator[None]:
        """Time the body as back-pressured (waiting for room downstream)."""
        began = self._clock()
        try:
            yield
        finally:
            self._back_pressured += self._clock() - began

    def add_idle(self, seconds: float) -> None:
        """Count ``seconds`` already spent waiting for input as idle."""
        self._idle += seconds

    def sync(self) -> TaskMetricsSnapshot:
        """Write the accumulated times into the counters, take a sample and publish a new
        :attr:`snapshot` (also returned)."""
        now = self._clock()
        elapsed = 0.0 if self._started is None else now - self._started
        idle_ms = round(self._idle * 1000)
        back_pressured_ms = round(self._back_pressured * 1000)
        counters = self.counters
        counters.idle_ms = idle_ms
        counters.backpressured_ms = back_pressured_ms
        counters.busy_ms = max(0, round(elapsed * 1000) - idle_ms - back_pressured_ms)
        sample = _Sample(
            now,
            counters.records_in,
            counters.records_out,
            counters.busy_ms,
            idle_ms,
            back_pressured_ms,
        )
        self._samples.append(sample)
        while self._samples and now - self._samples[0].at > RATE_WINDOW:
            self._samples.popleft()
        rate_base = self._samples[0]
        time_base = next(s for s in self._samples if now - s.at <= TIME_WINDOW)
        self.snapshot = TaskMetricsSnapshot(
            **{
                **vars(self.snapshot),
                "records_in": counters.records_in,
                "records_out": counters.records_out,
                "dead_letters": counters.dead_letters,
                "late_records": counters.late_records,
                "bundles": counters.bundles,
                "busy_ms": counters.busy_ms,
                "idle_ms": idle_ms,
                "backpressured_ms": back_pressured_ms,
                "records_in_per_second": _rate(rate_base, sample, "records_in"),
                "records_out_per_second": _rate(rate_base, sample, "records_out"),
                "busy_ms_per_second": _ms_per_second(time_base, sample, "busy_ms"),
                "idle_ms_per_second": _ms_per_second(time_base, sample, "idle_ms"),
                "backpressured_ms_per_second": _ms_per_second(
                    time_base, sample, "backpressured_ms"
                ),
                "current_input_watermark_ms": self.current_input_watermark_ms,
                "timestamp_ms": round(time.time() * 1000),
                "current_output_watermark_ms": self.current_output_watermark_ms,
                "head_operator_metrics": self.head_operator.values(),
            }
        )
        return self.snapshot


def _rate(base: _Sample, last: _Sample, counter: str) -> float:
    span = last.at - base.at
    if span <= 0:
        return 0.0
    return float(max(0, getattr(last, counter) - getattr(base, counter))) / span


def _ms_per_second(base: _Sample, last: _Sample, counter: str) -> float:
    return min(1000.0, _rate(base, last, counter))
