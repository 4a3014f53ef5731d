"""WindowStreamTask: the keyed event-time window operator, chained with transforms and a sink.

State: the exchange files received and not yet fully fired (partial aggregates per key and
window, or buffered records). When the input gate's watermark (the minimum over the producers'
watermarks) reaches ``window_end - 1`` of some pending window, the task fires: one Spark job
reads the pending files, keeps the windows that became complete since the last firing, merges
partials (or aggregates buffered records) per key and window, applies the chained transforms and
hands the result to the sink. At the end of bounded input the producers' final MAX watermark
fires every remaining window (Flink's semantics). When too many files accumulate without a
firing, they are compacted into one (one Spark job).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from dataclasses import replace
from typing import Any

from millrace.api.operators import WindowAggregateOperator
from millrace.config import ExecutionOptions
from millrace.errors import PipelineError
from millrace.runtime.io.partition_events import MIN_WATERMARK, DataBundle
from millrace.spark.stream_task import SparkStreamTask
from millrace.spark.windowing import WINDOW_START, window_end_ms, window_output_columns

__all__ = ["WindowStreamTask"]

logger = logging.getLogger(__name__)


class WindowStreamTask(SparkStreamTask):
    """Runs a keyed window chain."""

    def invoke(self) -> None:
        env = self.environment
        op = self.operators[0]
        if not isinstance(op, WindowAggregateOperator):
            raise PipelineError(
                "a window chain must start with a WindowAggregateOperator", env.task_name
            )
        if self.sink is None:
            raise PipelineError("a window chain must end in a sink", env.task_name)
        gate = env.input_gate
        if gate is None:
            raise PipelineError("a window task needs an input gate", env.task_name)
        self._op = op
        self._files: list[DataBundle] = []
        self._fired = MIN_WATERMARK
        self._sequence = 0
        self._schema: Any = None  # schema of the exchange files, known after the first read
        poll_timeout = env.configuration.get(ExecutionOptions.PARTITION_POLL_TIMEOUT)
        max_files = env.configuration.get(ExecutionOptions.STATE_COMPACTION_FILES)
        while not gate.finished:
            env.check_cancelled()
            events = gate.poll_next(poll_timeout)
            while events:  # take whatever else already arrived before deciding to fire
                for _, event in events:
                    if isinstance(event, DataBundle):
                        self._files.append(event)
                        env.metrics.records_in += event.rows
                events = gate.poll_next(0) if not gate.finished else []
            if self._ready(gate.watermark):
                self._fire(gate.watermark)
            elif len(self._files) > max_files:
                self._compact()
        if self._ready(gate.watermark):
            self._fire(gate.watermark)
        gate.close()

    def _ready(self, watermark: int) -> bool:
        """Whether some pending window ends at or before ``watermark + 1``."""
        return watermark > self._fired and any(
            f.min_window_end_ms is None or f.min_window_end_ms - 1 <= watermark for f in self._files
        )

    def _pending_frame(self) -> Any:
        from pyspark.sql import functions as F

        reader = self.spark.read
        if self._schema is not None:
            reader = reader.schema(self._schema)
        frame = reader.parquet(*[f.path for f in self._files])
        self._schema = self._schema or frame.schema
        if self._fired > MIN_WATERMARK:
            frame = frame.where(window_end_ms(self._op.window) - 1 > F.lit(self._fired))
        return frame

    def _fire(self, watermark: int) -> None:
        from pyspark.sql import functions as F

        op, env = self._op, self.environment
        started = time.perf_counter()
        frame = self._pending_frame().where(window_end_ms(op.window) - 1 <= F.lit(watermark))
        grouped = frame.groupBy(*op.keys, WINDOW_START)
        aggregated = grouped.agg(
            *(op.plan.final_columns() if op.plan.decomposable else op.plan.columns)
        )
        names = tuple(aggregated.columns[len(op.keys) + 1 :])
        result = aggregated.select(*window_output_columns(op.keys, op.window, names))
        result = self.apply_transforms(result, self.transforms)
        table = self.collect(result)
        assert self.sink is not None
        env.metrics.records_out += self.sink.sink.write(
            table, self.tdd.job_id, self.tdd.subtask_index, self._sequence, self.tdd.attempt_id
        )
        env.metrics.bundles += 1
        self._sequence += 1
        self._fired = watermark
        done = [
            f
            for f in self._files
            if f.max_window_end_ms is not None and f.max_window_end_ms - 1 <= watermark
        ]
        # Windows of the kept files that end at or before the watermark have fired: their
        # earliest unfired window ends no sooner than the window holding watermark + 1.
        next_end = op.window.window_start_ms(watermark + 1) + op.window.size_ms
        self._files = [
            replace(f, min_window_end_ms=max(f.min_window_end_ms or next_end, next_end))
            for f in self._files
            if f not in done
        ]
        for f in done:
            _remove(f.path)
        logger.info(
            "%s: fired at watermark %d: %d rows from %d files in %.3f s",
            env.task_name,
            watermark,
            table.num_rows,
            len(done),
            time.perf_counter() - started,
        )

    def _compact(self) -> None:
        import pyarrow.compute as pc
        import pyarrow.parquet as pq
        from pyspark.sql import functions as F

        op, env = self._op, self.environment
        frame = self._pending_frame()
        if op.plan.decomposable:
            merged = frame.groupBy(*op.keys, WINDOW_START).agg(*op.plan.merge_columns())
            # Keep the partials' types (a sum of decimal sums would widen each compaction).
            types = dict(frame.dtypes)
            frame = merged.select(*[F.col(c).cast(types[c]) for c in merged.columns])
        table = self.collect(frame)
        old = self._files
        self._files = []
        if table.num_rows:
            directory = env.working_dir / "state" / self.tdd.vertex_id / self.tdd.attempt_id
            directory.mkdir(parents=True, exist_ok=True)
            name = f"{self.tdd.subtask_index:03d}-{self._sequence:06d}-compacted.parquet"
            path = directory / name
            pq.write_table(table, path)
            bounds = pc.min_max(table.column(WINDOW_START))
            size = op.window.size_ms
            self._files = [
                DataBundle(
                    str(path),
                    table.num_rows,
                    bounds["min"].as_py() // 1000 + size,
                    bounds["max"].as_py() // 1000 + size,
                )
            ]
        env.metrics.bundles += 1
        self._sequence += 1
        for f in old:
            _remove(f.path)


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)
