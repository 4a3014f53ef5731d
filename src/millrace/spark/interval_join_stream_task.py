"""IntervalJoinStreamTask: Flink's event-time interval join, executed by Spark.

Each input's producers tag every row with its event time in ms (``__ws``, microseconds) and its
key group and HASH-partition them by the key group of their keys; rows at or below their
producer's watermark are late and go to the ``late`` side output (Flink drops late rows of an
interval join). The task keeps two lists of files per input: rows already joined (state) and
rows received since the last join (new). A join step runs one Spark job: the new rows of each
input against the other input's state and new rows, keeping a pair when at least one of its rows
is new, so every pair ``(a, b)`` with equal keys and ``a.ts + lower <= b.ts <= a.ts + upper``
(inclusive, Flink's default) is emitted exactly once, as soon as both rows arrived. The step
runs once the events at hand are taken, and at every aligned barrier before the state is
written, so a snapshot holds only joined rows.

State is dropped as the watermark passes: a row ``a`` of the first input can match no future
row once the watermark is above ``a.ts + upper``, a row ``b`` of the second input once it is
above ``b.ts - lower`` (Flink's cleanup timers); a state file whose rows all expired is deleted,
and compaction (pyarrow, no Spark job) keeps only rows that can still match.
"""

from __future__ import annotations

import functools
import logging
import time
from typing import Any

from millrace.api.join_operators import IntervalJoinOperator
from millrace.errors import PipelineError
from millrace.runtime.io.partition_events import DataBundle
from millrace.spark.keyed_state_files import remove_file
from millrace.spark.two_input_stream_task import TwoInputStreamTask
from millrace.spark.windowing import WINDOW_START

__all__ = ["IntervalJoinStreamTask"]

logger = logging.getLogger(__name__)

_NEW = "__new"


class IntervalJoinStreamTask(TwoInputStreamTask):
    """Runs an interval join chain.

    Schema:
        ``(first input's columns..., second input's columns...)``, one row per pair.

    Threading:
        ``invoke`` on the task thread.
    """

    def _open(self) -> None:
        op = self.operators[0]
        if not isinstance(op, IntervalJoinOperator):
            raise PipelineError(
                "an interval join chain must start with an IntervalJoinOperator",
                self.environment.task_name,
            )
        self.interval = op
        self.new: tuple[list[DataBundle], list[DataBundle]] = ([], [])

    def pairs(self, left: Any, right: Any, condition: Any = None) -> Any:
        """Pairs ``(a, b)`` with equal keys and ``a.ts + lower <= b.ts <= a.ts + upper``
        (inclusive; ``__ws`` is the event time in microseconds), lazy."""
        from pyspark.sql import functions as F

        op = self.interval
        a, b = F.col(f"l.{WINDOW_START}"), F.col(f"r.{WINDOW_START}")
        on = b.between(a + F.lit(op.lower_ms * 1000), a + F.lit(op.upper_ms * 1000))
        if condition is not None:
            on = on & condition
        return self.joined(left, right, on).select(*self.output_columns())

    def _on_bundle(self, side: int, bundle: DataBundle) -> None:
        self.new[side].append(bundle)

    def _before_snapshot(self) -> None:
        self._join_new()

    def _advance(self, watermark: int) -> None:
        self._join_new()
        if watermark > self.fired:
            self.fired = watermark
            for side in (0, 1):
                kept = []
                for f in self.files[side]:
                    if self._cleanup_ms(side, (f.max_window_end_ms or 0) - 1) < watermark:
                        remove_file(f.path)
                    else:
                        kept.append(f)
                self.files[side][:] = kept
        for side in (0, 1):
            if len(self.files[side]) > self.max_files:
                self.compact(side)

    def _cleanup_ms(self, side: int, timestamp_ms: int) -> int:
        """The last watermark at which a row of ``side`` with ``timestamp_ms`` can match."""
        op = self.interval
        return timestamp_ms + op.upper_ms if side == 0 else timestamp_ms - op.lower_ms

    def _side(self, side: int) -> Any:
        """New and joined rows of ``side`` with the ``__new`` flag (lazy), or None."""
        from pyspark.sql import functions as F

        parts = [
            self.read([f.path for f in files], side).withColumn(_NEW, F.lit(new))
            for files, new in ((self.new[side], True), (self.files[side], False))
            if files
        ]
        return functools.reduce(lambda a, b: a.unionByName(b), parts) if parts else None

    def _join_new(self) -> None:
        from pyspark.sql import functions as F

        if not (self.new[0] or self.new[1]):
            return
        started = time.perf_counter()
        left, right = self._side(0), self._side(1)
        rows = 0
        if left is not None and right is not None:
            new_pair = F.col(f"l.{_NEW}") | F.col(f"r.{_NEW}")
            rows = self.emit(self.pairs(left, right, new_pair))
        for side in (0, 1):
            self.files[side].extend(self.new[side])
            self.new[side].clear()
        logger.info(
            "%s: joined new rows: %d pairs in %.3f s",
            self.environment.task_name,
            rows,
            time.perf_counter() - started,
        )

    def _live(self, side: int, table: Any) -> Any:
        """Rows that can still match a row to come (cleanup time >= watermark)."""
        import pyarrow.compute as pc

        timestamps = pc.divide(table.column(WINDOW_START), 1000)
        shift = self.interval.upper_ms if side == 0 else -self.interval.lower_ms
        return table.filter(pc.greater_equal(pc.add(timestamps, shift), self.fired))
