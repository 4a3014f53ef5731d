"""SourceStreamTask: reads its splits in bundles and runs the chain, one Spark job per bundle.

The source's reader turns the next records of the assigned splits into one lazy DataFrame; the
chain — set malformed records aside as dead letters, user transforms, then local window
pre-aggregation (partials per key and window), window assignment (buffered windows), or sinks —
is one Spark plan executed by one action (``toArrow``). An Observation on the same plan counts
rows read and dead letters and finds each open split's largest event time, so counting costs no
extra job. Output rows are split by key group into one exchange file per consumer subtask.

Watermarks are per split (``SplitWatermarkTracker``), emitted in-band after the bundles they
follow; a bounded source ends with a MAX watermark and EndOfPartition (Flink's semantics). A
subtask with no split to read, or (with ``idleness``) no record read for that long, goes idle
(``WatermarkStatus``) so that it does not hold back the event time of the others.

Checkpoints: a trigger from the CheckpointCoordinator is taken at the next bundle boundary —
the split positions (with each split's own watermark) and the splits finished so far are
snapshotted, a CheckpointBarrier goes into the output after every bundle read before it, and
the task acknowledges (seed 002). A restored task resumes with the restored watermark; its
splits come back from the JobMaster with their positions and watermarks.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any

from millrace.api.connector.source import SourceBundle, SourceReader, SourceReaderContext
from millrace.api.join_operators import RebalanceOperator
from millrace.api.operators import (
    KeyedRecordsOperator,
    LocalKeyedAggregateOperator,
    LocalWindowAggregateOperator,
    SinkOperator,
    SourceOperator,
    WindowAssignOperator,
)
from millrace.config import ExecutionOptions
from millrace.errors import CheckpointDeclinedError, PipelineError
from millrace.runtime.checkpoint.task_state_snapshot import ChainedKeyedState, TaskStateSnapshot
from millrace.runtime.io import exchange_store
from millrace.runtime.io.partition_events import (
    MAX_WATERMARK,
    CheckpointBarrier,
    EndOfPartition,
    Watermark,
    WatermarkStatus,
)
from millrace.spark.exchange import write_exchange_files, write_rebalanced
from millrace.spark.running_aggregation import keyed_exchange_frame
from millrace.spark.side_outputs import DEAD_LETTERS, LATE, side_output_rows, source_column
from millrace.spark.source_watermarks import SplitWatermarkTracker
from millrace.spark.stream_task import SparkStreamTask
from millrace.spark.windowing import (
    KEY_GROUP,
    LATEST,
    TARGET,
    WINDOW_END,
    WINDOW_START,
    assign_windows,
    key_group,
    late_condition,
    marks_latest,
    merge_sessions,
    target_subtask,
    window_end_ms,
)

__all__ = ["SourceStreamTask"]

logger = logging.getLogger(__name__)

_LATE = "__late"
_ROWS = "__rows"


class SourceStreamTask(SparkStreamTask):
    """Runs a source chain.

    Threading:
        ``invoke`` on the task thread.
    """

    def invoke(self) -> None:
        env = self.environment
        self._open(env.configuration.get(ExecutionOptions.BUNDLE_MAX_RECORDS))
        if self.tdd.output_partition is not None:
            # the first event: the watermark it starts from (restored, or the minimum). Its
            # consumers deploy now (ScheduleOrUpdateConsumers), not on its first records: a
            # restored window must run, fire and checkpoint whether or not records come
            env.broadcast(Watermark(self._tracker.emitted))
        sequence = 0
        try:
            while True:
                env.check_cancelled()
                self._take_checkpoints()
                self._fetch_splits()
                if self._exhausted and self._reader.is_finished():
                    break
                self._set_active(self._has_records_to_read())
                env.wait_for_output_room(self._while_back_pressured)
                polled = time.monotonic()
                bundle = self._reader.poll(self._max_delay)
                if bundle is None:  # the poll waited for records: idle
                    env.io_metrics.add_idle(time.monotonic() - polled)
                else:
                    self._last_records_at = time.monotonic()
                    self._set_active(True)
                    self._process(bundle, sequence)
                    sequence += 1
                self.report_progress()
            self._take_checkpoints()
        finally:
            self._reader.close()
        self.report_clock(MAX_WATERMARK, force=True)
        if self.tdd.output_partition is not None:
            env.broadcast(Watermark(MAX_WATERMARK))
            env.broadcast(EndOfPartition())

    def _open(self, max_records: int) -> None:
        """Create the reader (bundles of at most ``max_records`` records) and the task's
        split and watermark bookkeeping."""
        env = self.environment
        source_op = self.operators[0]
        if not isinstance(source_op, SourceOperator):
            raise PipelineError("a source chain must start with a SourceOperator", env.task_name)
        self._source_op = source_op
        self._tail = [
            op
            for op in self.operators
            if not (isinstance(op, SinkOperator) and op.side_output is not None)
        ][-1]
        conf = env.configuration
        self._max_delay = conf.get(ExecutionOptions.BUNDLE_MAX_DELAY)
        self._retry_interval = conf.get(ExecutionOptions.SOURCE_DISCOVERY_INTERVAL)
        self._reader: SourceReader = source_op.source.create_reader(
            SourceReaderContext(
                self.tdd.subtask_index,
                self.tdd.parallelism,
                max_records,
                self._max_delay,
                conf,
                self.spark,
                env.io_metrics.head_operator,
                exchange_store.join(
                    env.working_dir, "source", self.tdd.vertex_id, self.tdd.attempt_id
                ),
            )
        )
        self._tracker = SplitWatermarkTracker(source_op.max_out_of_orderness_ms)
        self._active = True
        self._idle_timeout = (
            source_op.idle_timeout_ms / 1000 if source_op.idle_timeout_ms is not None else None
        )
        self._last_records_at = time.monotonic()
        self._finished: list[str] = []
        self._exhausted: bool = False
        self._retry_at = 0.0
        if env.restore is not None:
            self._tracker.restore(env.restore.watermark_ms)

    def _while_back_pressured(self) -> None:
        """While the output channels are full: checkpoint barriers still go out (they are not
        counted by the window), and the metrics still reach the JobMaster."""
        self._take_checkpoints()
        self.report_progress()

    # Splits ------------------------------------------------------------------------------------

    def _fetch_splits(self) -> None:
        """Ask the JobMaster for splits while the reader wants some (RequestNextInputSplit);
        an unbounded source without new splits is asked again after the discovery interval."""
        env = self.environment
        while not self._exhausted and self._reader.wants_splits():
            if time.monotonic() < self._retry_at:
                return
            reply = env.next_input_split(timeout=self.ask_timeout)
            self._tracker.set_pending_bound(reply.watermark_bound_ms, reply.more_expected)
            if reply.split is None:
                if reply.more_expected:
                    self._retry_at = time.monotonic() + self._retry_interval
                else:
                    self._exhausted = True
                return
            self._reader.add_split(reply.split, reply.position)
            self._tracker.open_split(
                reply.split.split_id, reply.watermark_bound_ms, reply.split_watermark_ms
            )

    def _has_records_to_read(self) -> bool:
        """False when the reader has no open split, or when ``idleness`` is set and no record
        came for that long."""
        if self._reader.is_finished():
            return False
        if self._idle_timeout is None:
            return True
        return time.monotonic() - self._last_records_at < self._idle_timeout

    def _set_active(self, active: bool) -> None:
        """Go idle while there is nothing to read (an unbounded source waiting for splits),
        active again before the next records (Flink's WatermarkStatus)."""
        if active != self._active:
            self._active = active
            if self.tdd.output_partition is not None:
                self.environment.broadcast(WatermarkStatus(active))
            self.report_clock(self._tracker.emitted if active else MAX_WATERMARK, force=True)

    # Checkpoints -------------------------------------------------------------------------------

    def _take_checkpoints(self) -> None:
        """Snapshot for every trigger received, put its barrier out, acknowledge (or decline,
        if a sink's pre-commit failed: the barrier still goes out, so that the tasks
        downstream stay aligned)."""
        env = self.environment
        for checkpoint_id, timestamp_ms in env.take_checkpoint_triggers():
            try:
                chained = self._chained_snapshot(checkpoint_id)
                sink_pending = self.pre_commit(checkpoint_id)
            except CheckpointDeclinedError as declined:
                if self.tdd.output_partition is not None:
                    env.broadcast(CheckpointBarrier(checkpoint_id, timestamp_ms))
                logger.warning("%s: %s", env.task_name, declined)
                env.checkpoint_responder.decline_checkpoint(checkpoint_id, declined.reason)
                continue
            snapshot = TaskStateSnapshot(
                split_states=tuple(
                    replace(s, watermark_ms=self._tracker.split_watermark(s.split.split_id))
                    for s in self._reader.snapshot()
                ),
                finished_splits=tuple(self._finished),
                sink_pending=sink_pending,
                watermark_ms=self._tracker.emitted,
                chained=chained,
            )
            if self.tdd.output_partition is not None:
                env.broadcast(CheckpointBarrier(checkpoint_id, timestamp_ms))
            env.checkpoint_responder.acknowledge_checkpoint(checkpoint_id, snapshot)

    def _chained_snapshot(self, checkpoint_id: int) -> ChainedKeyedState | None:
        """The state of a keyed stage chained into this task (``KeyedChainStreamTask``)."""
        return None

    # Bundles -----------------------------------------------------------------------------------

    def _process(self, bundle: SourceBundle, sequence: int) -> None:
        self._emit_watermark(self._tracker.advance())
        started = time.perf_counter()
        maxima = self._run_bundle(bundle, sequence, self._tracker.emitted)
        for state in bundle.progress:
            split_id = state.split.split_id
            if state.finished:
                self._tracker.close_split(split_id, maxima.get(split_id))
                self._finished.append(split_id)
            else:
                self._tracker.on_records(split_id, maxima.get(split_id))
        logger.info(
            "%s: bundle %d (%d splits) in %.3f s",
            self.environment.task_name,
            sequence,
            len(bundle.progress),
            time.perf_counter() - started,
        )
        self._emit_watermark(self._tracker.advance())
        self.report_clock(self._tracker.emitted)

    def _emit_watermark(self, watermark: int | None) -> None:
        if watermark is not None:  # a source reads none: it reports the one it emits
            self.environment.io_metrics.current_input_watermark_ms = watermark
        if watermark is not None and self.tdd.output_partition is not None:
            self.environment.broadcast(Watermark(watermark))

    def _run_bundle(
        self, bundle: SourceBundle, sequence: int, watermark: int | None
    ) -> dict[str, int]:
        """Run one bundle, late records judged against ``watermark`` (None: no record is late,
        as in BATCH mode).

        Returns:
            Split id -> largest event time (epoch ms) of the bundle's records of that split,
            when the bundle names each record's split.
        """
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        env = self.environment
        event_time = self._source_op.event_time
        reason = bundle.malformed_reason
        if event_time is not None:
            null_time = F.when(
                F.col(event_time).isNull(), F.lit(f"event time column {event_time!r} is null")
            )
            reason = null_time if reason is None else F.coalesce(reason, null_time)
        base = bundle.frame
        known_rows = bundle.rows_from_statistics(event_time)
        if known_rows is not None:  # nothing to count or look for as the records are read
            reason = None
        metrics = [F.count(F.lit(1)).alias("rows")]
        if reason is not None:
            metrics.append(F.count_if(reason.isNotNull()).alias("dead"))
        if bundle.full_parse is not None:
            metrics.append(bundle.full_parse.alias("parsed"))
        split_ids = [s.split.split_id for s in bundle.progress]
        if bundle.split_column is not None and event_time is not None:
            column = F.col(bundle.split_column)
            good = column.isNotNull() if reason is None else reason.isNull()
            for i, split_id in enumerate(split_ids):
                # malformed rows never move a split's watermark
                mine = (column == F.lit(split_id)) & good
                latest = F.when(mine, F.unix_millis(F.col(event_time)))
                metrics.append(F.max(latest).alias(f"max{i}"))
        observed_in = Observation(f"in-{sequence}")
        # The observation runs in the bundle's Spark job, but as Spark's CollectMetrics: it
        # splits code generation and keeps filters out of the scan (~20% of a large scan).
        frame = base if known_rows is not None else base.observe(observed_in, *metrics)
        if reason is not None:
            frame = frame.where(reason.isNull())
        if bundle.internal_columns:
            frame = frame.drop(*bundle.internal_columns)
        frame = self.apply_transforms(frame, self.transforms)

        late = 0
        tail = self._tail
        if isinstance(tail, LocalWindowAggregateOperator | WindowAssignOperator):
            if sequence == 0:
                _require_column(frame, tail.event_time, env.task_name)
            late, windowed = self._window_output(frame, tail, watermark, sequence)
        elif isinstance(tail, LocalKeyedAggregateOperator | KeyedRecordsOperator):
            self._keyed_output(frame, tail, sequence)
        elif isinstance(tail, RebalanceOperator):  # a union feeding sinks
            env.metrics.records_out += write_rebalanced(self.collect(frame), env, sequence)
        elif self.sinks:
            env.metrics.records_out += self.write_sinks(self.collect(frame), sequence)
        else:
            raise PipelineError("a source chain must end in a window or a sink", env.task_name)
        env.metrics.bundles += 1

        counts = {"rows": known_rows} if known_rows is not None else observed_in.get
        env.metrics.records_in += int(counts["rows"])
        dead = int(counts.get("dead") or 0)
        source = source_column(bundle)
        if dead:
            env.metrics.dead_letters += dead
            self._write_dead_letters(base, reason, bundle, source, sequence)
        if late and watermark is not None:
            env.metrics.late_records += late
            self._write_late(windowed, tail, watermark, source, sequence)
        return {
            split_id: int(counts[f"max{i}"])
            for i, split_id in enumerate(split_ids)
            if counts.get(f"max{i}") is not None
        }

    def _window_output(
        self,
        frame: Any,
        tail: LocalWindowAggregateOperator | WindowAssignOperator,
        watermark: int | None,
        sequence: int,
    ) -> tuple[int, Any]:
        """Run the bundle's Spark job and hand its windowed output to the consumer subtasks:
        partials per key and window (or records with their windows), by key group.

        Returns:
            The number of late input records and the windowed records (lazy DataFrame), from
            which the late ones are written to the late side output.
        """
        from pyspark.sql import functions as F

        window = tail.window
        consumers = self.tdd.num_subpartitions
        groups = key_group(tail.keys, self.tdd.max_parallelism)
        assigned = assign_windows(frame, tail.event_time, window)
        # a record counts (and goes to the late output) once: on its latest window's row
        latest = F.col(LATEST) if marks_latest(window) else F.lit(True)
        is_late = (
            F.lit(False)  # BATCH: no record is late
            if watermark is None
            else late_condition(window, watermark, tail.lateness_ms)
        )
        windowed = assigned.withColumns(  # one plan step: no column listed one by one
            {
                _LATE: is_late,
                LATEST: latest,
                KEY_GROUP: groups,
                TARGET: target_subtask(groups, self.tdd.max_parallelism, consumers),
            }
        )
        bounds = [WINDOW_START, WINDOW_END] if window.is_merging else [WINDOW_START]
        if isinstance(tail, LocalWindowAggregateOperator):
            # Late rows are kept apart by a grouping key, not a filter: one plan step less,
            # and their count comes with the partials. The key group is a function of the
            # keys: grouping by it too adds no group. Sessions merge within the bundle.
            local = merge_sessions(windowed, [*tail.keys, _LATE]) if window.is_merging else windowed
            out = local.groupBy(*tail.keys, *bounds, _LATE, KEY_GROUP, TARGET).agg(
                *tail.plan.partial_columns(), F.count_if(F.col(LATEST)).alias(_ROWS)
            )
        else:
            out = windowed.withColumn(_ROWS, F.col(LATEST).cast("long")).drop(LATEST)
        table, late = _split_late(self.collect(out))
        self._exchange(table, sequence, window.size_ms)
        return late, windowed

    def _keyed_output(
        self, frame: Any, tail: LocalKeyedAggregateOperator | KeyedRecordsOperator, sequence: int
    ) -> None:
        """Run the bundle's Spark job and hand its partials per key (or its records) to the
        consumer subtasks of the running aggregate, by key group."""
        consumers = self.tdd.num_subpartitions
        out = keyed_exchange_frame(frame, tail, self.tdd.max_parallelism, consumers)
        self._exchange(self.collect(out), sequence, None)

    def _exchange(self, table: Any, sequence: int, window_size_ms: int | None) -> None:
        """Hand ``table`` (``pyarrow.Table`` with ``__target``) to the consumer subtasks: one
        exchange file per consumer, announced on its subpartition."""
        env = self.environment
        files = write_exchange_files(
            table,
            exchange_store.partition_directory(
                env.working_dir, self.tdd.vertex_id, self.tdd.attempt_id
            ),
            f"{self.tdd.subtask_index:03d}-{sequence:06d}",
            self.tdd.num_subpartitions,
            window_size_ms,
        )
        for target, exchanged in files:
            env.emit(target, exchanged)
        env.metrics.records_out += table.num_rows

    def _write_dead_letters(
        self, base: Any, reason: Any, bundle: SourceBundle, source: Any, sequence: int
    ) -> None:
        from pyspark.sql import functions as F

        columns = [F.col(f"`{c}`") for c in base.columns if c not in bundle.internal_columns]
        as_json = F.to_json(F.struct(*columns))
        raw = bundle.raw_record
        record = as_json if raw is None else F.coalesce(raw, as_json)
        bad = base.select(reason.alias("reason"), record.alias("record")).where(
            F.col("reason").isNotNull()
        )
        self._stage_side_output(DEAD_LETTERS, bad, source, sequence)

    def _write_late(
        self, windowed: Any, tail: Any, watermark: int, source: Any, sequence: int
    ) -> None:
        from pyspark.sql import functions as F

        internal = (_LATE, WINDOW_START, WINDOW_END, LATEST, TARGET, KEY_GROUP)
        columns = [F.col(f"`{c}`") for c in windowed.columns if c not in internal]
        reason = "late: window ending at %d ms already fired at watermark %d ms"
        if tail.lateness_ms:
            reason = (
                "late: window ending at %d ms is past its allowed lateness of "
                f"{tail.lateness_ms} ms at watermark %d ms"
            )
        late = windowed.where(F.col(_LATE) & F.col(LATEST)).select(
            F.format_string(reason, window_end_ms(tail.window), F.lit(watermark)).alias("reason"),
            F.to_json(F.struct(*columns)).alias("record"),
        )
        self._stage_side_output(LATE, late, source, sequence)

    def _stage_side_output(self, tag: str, frame: Any, source: Any, sequence: int) -> None:
        """One Spark job collects the rows (``source``: the column naming their origin); the
        side output's sink stages them.

        Raises:
            PipelineError: If the JobGraph chained no sink for side output ``tag``.
        """
        if tag not in self.side_outputs:
            raise PipelineError(
                f"the JobGraph has no {tag!r} side-output sink in this source vertex",
                self.environment.task_name,
            )
        position, sink = self.side_outputs[tag]
        rows = side_output_rows(frame, source, self.tdd.subtask_index)
        self.stage(position, sink, self.collect(rows), sequence)


def _require_column(frame: Any, column: str, task_name: str) -> None:
    if column not in frame.columns:
        raise PipelineError(
            f"event-time column {column!r} is not in the stream (columns: "
            f"{frame.columns}); keep it through transform()",
            task_name,
        )


def _split_late(table: Any) -> tuple[Any, int]:
    """Drop late rows (``__late``) from a bundle's Arrow table; return it and the number of late
    input records (the sum of ``__rows`` over late rows)."""
    import pyarrow.compute as pc

    late_mask = table.column(_LATE)
    late = pc.sum(table.filter(late_mask).column(_ROWS)).as_py() or 0
    on_time = table.filter(pc.invert(late_mask)).drop_columns([_LATE, _ROWS])
    return on_time, int(late)
