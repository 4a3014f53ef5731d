"""SourceStreamTask: reads input splits and runs the chain, one Spark job per bundle.

A bundle is one input split. For each, the chain — read, drop malformed records to the dead-letter
output, user transforms, then either local window pre-aggregation (partials per key and window),
window assignment (buffered windows), or a sink — is one Spark plan executed by one action
(``toArrow``). An Observation on the same plan counts rows read, dead letters, late rows and the
largest event time, so counting costs no extra job. Output rows are split by key group into one
exchange file per consumer subtask.

Watermarks: per split (see ``SplitWatermarkTracker``); emitted in-band after the bundles they
follow; a final MAX watermark and EndOfPartition at the end of input (Flink's bounded sources).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from millrace.api.operators import (
    LocalWindowAggregateOperator,
    SourceOperator,
    WindowAssignOperator,
)
from millrace.config import ExecutionOptions
from millrace.connectors.file_source import CORRUPT_COLUMN
from millrace.errors import PipelineError
from millrace.runtime.io.input_split import InputSplit
from millrace.runtime.io.partition_events import MAX_WATERMARK, EndOfPartition, Watermark
from millrace.spark.exchange import write_exchange_files
from millrace.spark.side_outputs import side_output_dir, write_side_output
from millrace.spark.source_watermarks import SplitWatermarkTracker
from millrace.spark.stream_task import SparkStreamTask
from millrace.spark.windowing import (
    TARGET,
    WINDOW_START,
    late_condition,
    target_subtask,
    window_end_ms,
    window_start_us,
)

__all__ = ["SourceStreamTask"]

logger = logging.getLogger(__name__)

_LATE = "__late"
_ROWS = "__rows"


class SourceStreamTask(SparkStreamTask):
    """Runs a source chain."""

    def invoke(self) -> None:
        env = self.environment
        source_op = self.operators[0]
        if not isinstance(source_op, SourceOperator):
            raise PipelineError("a source chain must start with a SourceOperator", env.task_name)
        tail = self.operators[-1]
        tracker = SplitWatermarkTracker(source_op.max_out_of_orderness_ms)
        self._schema: Any = None  # the first bundle's schema, reused: no footer read per bundle
        self._max_records = env.configuration.get(ExecutionOptions.BUNDLE_MAX_RECORDS)
        self._held: InputSplit | None = None
        self._exhausted = False
        sequence = 0
        while bundle := self._next_bundle(tracker):
            self._emit_watermark(tracker.advance())
            started = time.perf_counter()
            self._run_bundle(source_op, tail, bundle, sequence, tracker.emitted)
            for split in bundle:
                tracker.close_split(split.split_number)
            logger.info(
                "%s: bundle %d (%d splits) in %.3f s",
                env.task_name,
                sequence,
                len(bundle),
                time.perf_counter() - started,
            )
            self._emit_watermark(tracker.advance())
            sequence += 1
        if self.tdd.output_partition is not None:
            env.broadcast(Watermark(MAX_WATERMARK))
            env.broadcast(EndOfPartition())

    def _next_bundle(self, tracker: SplitWatermarkTracker) -> list[InputSplit]:
        """Splits for the next bundle: up to ``execution.bundle.max-records`` rows by their
        statistics. Every split fetched opens in ``tracker`` at its watermark bound; one that
        would overflow the bundle is held for the next."""
        env = self.environment
        bundle: list[InputSplit] = []
        rows = 0
        while True:
            if self._held is not None:
                split, self._held = self._held, None
            elif self._exhausted:
                return bundle
            else:
                env.check_cancelled()
                reply = env.next_input_split(timeout=self.ask_timeout)
                tracker.set_pending_bound(reply.watermark_bound_ms)
                if reply.split is None:
                    self._exhausted = True
                    return bundle
                split = reply.split
                tracker.open_split(split.split_number, reply.watermark_bound_ms)
            size = split.rows if split.rows is not None else self._max_records
            if bundle and rows + size > self._max_records:
                self._held = split
                return bundle
            bundle.append(split)
            rows += size
            if rows >= self._max_records:
                return bundle

    def _side_output_name(self, sequence: int) -> str:
        return (
            f"part-{self.tdd.job_id[:8]}-{self.tdd.subtask_index:05d}-{sequence:06d}-"
            f"{self.tdd.attempt_id[:8]}"
        )

    def _emit_watermark(self, watermark: int | None) -> None:
        if watermark is not None and self.tdd.output_partition is not None:
            self.environment.broadcast(Watermark(watermark))

    def _run_bundle(
        self,
        source_op: SourceOperator,
        tail: Any,
        splits: list[InputSplit],
        sequence: int,
        watermark: int,
    ) -> None:
        """Run one bundle over ``splits`` with late records judged against ``watermark``."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        env = self.environment
        spark = self.spark
        read = source_op.source.read(spark, splits, self._schema)
        self._schema = read.frame.schema if self._schema is None else self._schema
        event_time = source_op.event_time
        reason = read.malformed_reason
        if event_time is not None:
            null_time = F.when(
                F.col(event_time).isNull(), F.lit(f"event time column {event_time!r} is null")
            )
            reason = null_time if reason is None else F.coalesce(reason, null_time)
        base = read.frame
        metrics = [F.count(F.lit(1)).alias("rows")]
        if reason is not None:
            metrics.append(F.count_if(reason.isNotNull()).alias("dead"))
        if read.full_parse is not None:
            metrics.append(read.full_parse.alias("parsed"))
        observed_in = Observation(f"in-{sequence}")
        frame = base.observe(observed_in, *metrics)  # same Spark job as the bundle
        if reason is not None:
            frame = frame.where(reason.isNull())
        if read.raw_record is not None:
            frame = frame.drop(CORRUPT_COLUMN)
        frame = self.apply_transforms(frame, self.transforms)

        late = 0
        window = getattr(tail, "window", None)
        if isinstance(tail, LocalWindowAggregateOperator | WindowAssignOperator):
            if sequence == 0:
                _require_column(frame, tail.event_time, env.task_name)
            consumers = self.tdd.num_subpartitions
            windowed = frame.select(
                "*",
                window_start_us(tail.event_time, window).alias(WINDOW_START),
                late_condition(window, watermark).alias(_LATE),
                target_subtask(tail.keys, self.tdd.max_parallelism, consumers).alias(TARGET),
            )
            if isinstance(tail, LocalWindowAggregateOperator):
                # Late rows are kept apart by a grouping key, not a filter: one plan step less,
                # and their count comes with the partials.
                out = windowed.groupBy(*tail.keys, WINDOW_START, _LATE, TARGET).agg(
                    *tail.plan.partial_columns(), F.count(F.lit(1)).alias(_ROWS)
                )
            else:
                out = windowed.withColumn(_ROWS, F.lit(1))
            table, late = _split_late(self.collect(out))
            files = write_exchange_files(
                # per attempt: a zombie of a failed attempt can never overwrite a file that a
                # later attempt announced
                table,
                env.working_dir / "exchange" / self.tdd.vertex_id / self.tdd.attempt_id,
                f"{self.tdd.subtask_index:03d}-{sequence:06d}",
                consumers,
                window.size_ms,
            )
            for target, bundle in files:
                env.emit(target, bundle)
            env.metrics.records_out += table.num_rows
        elif self.sink is not None:
            table = self.collect(frame)
            env.metrics.records_out += self.sink.sink.write(
                table, self.tdd.job_id, self.tdd.subtask_index, sequence, self.tdd.attempt_id
            )
        else:
            raise PipelineError("a source chain must end in a window or a sink", env.task_name)
        env.metrics.bundles += 1

        counts = observed_in.get
        env.metrics.records_in += int(counts["rows"])
        dead = int(counts.get("dead") or 0)
        if dead:
            env.metrics.dead_letters += dead
            self._write_dead_letters(base, reason, read.raw_record, splits, sequence)
        if late:
            env.metrics.late_records += late
            self._write_late(windowed, window, watermark, splits, sequence)

    def _write_dead_letters(
        self, base: Any, reason: Any, raw_record: Any, splits: list[InputSplit], sequence: int
    ) -> None:
        from pyspark.sql import functions as F

        columns = [F.col(f"`{c}`") for c in base.columns if c != CORRUPT_COLUMN]
        as_json = F.to_json(F.struct(*columns))
        record = as_json if raw_record is None else F.coalesce(raw_record, as_json)
        bad = base.select(reason.alias("reason"), record.alias("record")).where(
            F.col("reason").isNotNull()
        )
        env = self.environment
        write_side_output(
            bad,
            side_output_dir(env.configuration, self.tdd.job_name, "dead-letters"),
            _source_column(splits),
            self.tdd.subtask_index,
            self._side_output_name(sequence),
        )

    def _write_late(
        self, windowed: Any, window: Any, watermark: int, splits: list[InputSplit], sequence: int
    ) -> None:
        from pyspark.sql import functions as F

        internal = (_LATE, WINDOW_START, TARGET)
        columns = [F.col(f"`{c}`") for c in windowed.columns if c not in internal]
        late = windowed.where(F.col(_LATE)).select(
            F.format_string(
                "late: window ending at %d ms already fired at watermark %d ms",
                window_end_ms(window),
                F.lit(watermark),
            ).alias("reason"),
            F.to_json(F.struct(*columns)).alias("record"),
        )
        env = self.environment
        write_side_output(
            late,
            side_output_dir(env.configuration, self.tdd.job_name, "late"),
            _source_column(splits),
            self.tdd.subtask_index,
            self._side_output_name(sequence),
        )


def _require_column(frame: Any, column: str, task_name: str) -> None:
    if column not in frame.columns:
        raise PipelineError(
            f"event-time column {column!r} is not in the stream (columns: "
            f"{frame.columns}); keep it through transform()",
            task_name,
        )


def _source_column(splits: list[InputSplit]) -> Any:
    """Which file a row came from: Spark's input file name, else the bundle's splits."""
    from pyspark.sql import functions as F

    return F.coalesce(
        F.nullif(F.input_file_name(), F.lit("")), F.lit(", ".join(s.describe() for s in splits))
    )


def _split_late(table: Any) -> tuple[Any, int]:
    """Drop late rows (``__late``) from a bundle's Arrow table; return it and the number of late
    input records (the sum of ``__rows`` over late rows)."""
    import pyarrow.compute as pc

    late_mask = table.column(_LATE)
    late = pc.sum(table.filter(late_mask).column(_ROWS)).as_py() or 0
    on_time = table.filter(pc.invert(late_mask)).drop_columns([_LATE, _ROWS])
    return on_time, int(late)
