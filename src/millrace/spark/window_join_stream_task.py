"""WindowJoinStreamTask: Flink's window join (inner), executed by Spark when a window fires.

Each input's producers tag every row with its window start (``__ws``) and key group and
HASH-partition them by the key group of their join keys, so equal keys of both inputs meet in
one subtask. The task keeps each input's exchange files until their windows fired. When the
input gate's watermark (the minimum over the channels of both inputs) passes ``window_end - 1``
of a pending window, one Spark job reads both inputs' rows of the windows completed since the
last firing, joins them on the keys and the window, applies the chained transforms and stages
the result in the sinks: every pair of rows with equal keys in the same window, once per window
(tumbling or sliding windows: a producer gives a row of a sliding window one row per window it
belongs to, each with its ``__ws``). Rows of a
window that fired are late: their producers send them to the ``late`` side output, as for a
window aggregate. Null keys match nothing (SQL's equality).

Checkpoints: the unfired rows of each input (``TwoInputStreamTask``). Nothing fires at a
barrier (see ``WindowStreamTask``).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from millrace.api.join_operators import WindowJoinOperator
from millrace.errors import PipelineError
from millrace.runtime.io.partition_events import MIN_WATERMARK, DataBundle
from millrace.spark.keyed_state_files import remove_file
from millrace.spark.two_input_stream_task import TwoInputStreamTask
from millrace.spark.windowing import WINDOW_START

__all__ = ["WindowJoinStreamTask"]

logger = logging.getLogger(__name__)


class WindowJoinStreamTask(TwoInputStreamTask):
    """Runs a window join chain.

    Schema:
        ``(first input's columns..., second input's columns..., window_start: timestamp,
        window_end: timestamp)``, one row per matching pair and window.

    Threading:
        ``invoke`` on the task thread.
    """

    def _open(self) -> None:
        op = self.operators[0]
        if not isinstance(op, WindowJoinOperator):
            raise PipelineError(
                "a window join chain must start with a WindowJoinOperator",
                self.environment.task_name,
            )
        self.window = op.window
        self.window_size_ms = op.window.size_ms

    def pairs(self, left: Any, right: Any, condition: Any = None) -> Any:
        """Pairs of rows with equal keys and window (``__ws``), with ``window_start`` and
        ``window_end`` (lazy; see the class's schema)."""
        from pyspark.sql import functions as F

        start = F.col(f"l.{WINDOW_START}")
        same_window = start == F.col(f"r.{WINDOW_START}")
        on = same_window if condition is None else same_window & condition
        return self.joined(left, right, on).select(
            *self.output_columns(),
            F.timestamp_micros(start).alias("window_start"),
            F.timestamp_micros(start + F.lit(self.window_size_ms * 1000)).alias("window_end"),
        )

    def _advance(self, watermark: int) -> None:
        if self._ready(watermark):
            self._fire(watermark)
        for side in (0, 1):
            if len(self.files[side]) > self.max_files:
                self.compact(side)

    def _ready(self, watermark: int) -> bool:
        """Whether some pending window ends at or before ``watermark + 1``."""
        return watermark > self.fired and any(
            f.min_window_end_ms is None or f.min_window_end_ms - 1 <= watermark
            for files in self.files
            for f in files
        )

    def _window_rows(self, side: int, watermark: int) -> Any:
        """The rows of ``side`` in the windows that fire now (lazy), or None without files."""
        from pyspark.sql import functions as F

        due = [
            f
            for f in self.files[side]
            if f.min_window_end_ms is None or f.min_window_end_ms - 1 <= watermark
        ]
        if not due:
            return None
        end = F.floor(F.col(WINDOW_START) / 1000) + F.lit(self.window_size_ms)
        frame = self.read([f.path for f in due], side).where(end - 1 <= F.lit(watermark))
        if self.fired > MIN_WATERMARK:
            frame = frame.where(end - 1 > F.lit(self.fired))
        return frame

    def _fire(self, watermark: int) -> None:

        started = time.perf_counter()
        left = self._window_rows(0, watermark)
        right = self._window_rows(1, watermark)
        rows = 0
        if left is not None and right is not None:  # inner: nothing without both inputs
            rows = self.emit(self.pairs(left, right))
        self.fired = watermark
        next_end = self.window.next_unfired_end_ms(watermark)
        dropped = 0
        for side in (0, 1):
            kept: list[DataBundle] = []
            for f in self.files[side]:
                if f.max_window_end_ms is not None and f.max_window_end_ms - 1 <= watermark:
                    remove_file(f.path)
                    dropped += 1
                else:  # its windows up to the watermark fired
                    low = max(f.min_window_end_ms or next_end, next_end)
                    kept.append(DataBundle(f.path, f.rows, low, f.max_window_end_ms))
            self.files[side][:] = kept
        logger.info(
            "%s: fired at watermark %d: %d pairs, %d files done, in %.3f s",
            self.environment.task_name,
            watermark,
            rows,
            dropped,
            time.perf_counter() - started,
        )

    def _live(self, side: int, table: Any) -> Any:
        """Rows of windows not fired yet."""
        import pyarrow.compute as pc

        if self.fired <= MIN_WATERMARK:
            return table
        ends = pc.add(pc.divide(table.column(WINDOW_START), 1000), self.window_size_ms - 1)
        return table.filter(pc.greater(ends, self.fired))
