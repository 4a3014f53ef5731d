"""WindowStreamTask: the keyed event-time window operator, chained with transforms and sinks.

State: the exchange files received and not yet fully fired (partial aggregates per key and
window, or buffered records, each row with its key group). When the input gate's watermark (the
minimum over the producers' watermarks) reaches ``window_end - 1`` of some pending window, the
task fires: one Spark job reads the pending files, keeps the windows that became complete since
the last firing, merges partials (or aggregates buffered records) per key and window, applies
the chained transforms and stages the result in the sinks. At the end of bounded input the
producers' final MAX watermark fires every remaining window (Flink's semantics). When too many
files accumulate without a firing, they are compacted into one (one Spark job).

Checkpoints: when the gate hands over an aligned barrier, the task writes its pending rows (the
unfired windows) as one Parquet file under the checkpoint directory — with pyarrow, no Spark
job — and acknowledges with that file's key-group range, the fired watermark and the sink data
staged since the previous barrier (pre-commit). Restored, it reads
the rows of its own key groups from the restored files, whatever parallelism wrote them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from dataclasses import replace
from typing import Any

from millrace.api.operators import WindowAggregateOperator
from millrace.config import CheckpointingOptions, ExecutionOptions
from millrace.errors import CheckpointDeclinedError, PipelineError, TaskCancelledError
from millrace.runtime.checkpoint.checkpoint_storage import task_state_path
from millrace.runtime.checkpoint.key_groups import key_group_range
from millrace.runtime.checkpoint.task_state_snapshot import KeyedStateHandle, TaskStateSnapshot
from millrace.runtime.io.partition_events import (
    MIN_WATERMARK,
    CheckpointBarrier,
    DataBundle,
    PartitionEvent,
)
from millrace.spark.stream_task import SparkStreamTask
from millrace.spark.windowing import (
    KEY_GROUP,
    WINDOW_START,
    window_end_ms,
    window_output_columns,
)

__all__ = ["WindowStreamTask"]

logger = logging.getLogger(__name__)


class WindowStreamTask(SparkStreamTask):
    """Runs a keyed window chain.

    Threading:
        ``invoke`` on the task thread.
    """

    def invoke(self) -> None:
        env = self.environment
        gate = self.open_chain()
        self._files: list[DataBundle] = []
        self._fired = MIN_WATERMARK
        self._sequence = 0
        self._schema: Any = None  # schema of the exchange files, known after the first read
        self._key_groups = key_group_range(
            self.tdd.max_parallelism, self.tdd.parallelism, self.tdd.subtask_index
        )
        self._state_dir = env.working_dir / "state" / self.tdd.vertex_id / self.tdd.attempt_id
        if env.restore is not None:
            self._restore(env.restore)
        poll_timeout = env.configuration.get(ExecutionOptions.PARTITION_POLL_TIMEOUT)
        max_files = env.configuration.get(ExecutionOptions.STATE_COMPACTION_FILES)
        while not gate.finished:
            env.check_cancelled()
            events = gate.poll_next(poll_timeout)
            while events:  # take whatever else already arrived before deciding to fire
                self._accept(events)
                events = gate.poll_next(0) if not gate.finished else []
            if self._ready(gate.watermark):
                self._fire(gate.watermark)
            elif len(self._files) > max_files:
                self._compact()
            self.report_clock(self._fired)
            self.report_progress()
        if self._ready(gate.watermark):
            self._fire(gate.watermark)
        self.report_clock(self._fired, force=True)
        gate.close()

    def open_chain(self) -> Any:
        """Check the chain (a window, then sinks) and return the input gate.

        Raises:
            PipelineError: If the chain does not start with a window, has no sink or no input.
        """
        env = self.environment
        op = self.operators[0]
        if not isinstance(op, WindowAggregateOperator):
            raise PipelineError(
                "a window chain must start with a WindowAggregateOperator", env.task_name
            )
        if not self.sinks:
            raise PipelineError("a window chain must end in a sink", env.task_name)
        if env.input_gate is None:
            raise PipelineError("a window task needs an input gate", env.task_name)
        self._op = op
        return env.input_gate

    def _accept(self, events: list[tuple[int, PartitionEvent]]) -> None:
        for _, event in events:
            if isinstance(event, DataBundle):
                self._files.append(event)
                self.environment.metrics.records_in += event.rows
            elif isinstance(event, CheckpointBarrier):
                self._checkpoint(event)

    # Firing ------------------------------------------------------------------------------------

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
        table = self.collect(self.window_result(frame))
        env.metrics.records_out += self.write_sinks(table, self._sequence)
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

    def window_result(self, frame: Any) -> Any:
        """The chain's output over ``frame`` (exchange rows of the windows to fire), lazily:
        partials merged (or records aggregated) per key and window, then the transforms.

        Schema:
            ``(keys..., window_start: timestamp, window_end: timestamp, aggregates...)``
            before the transforms; one row per key and window.
        """
        op = self._op
        grouped = frame.groupBy(*op.keys, WINDOW_START)
        aggregated = grouped.agg(
            *(op.plan.final_columns() if op.plan.decomposable else op.plan.columns)
        )
        names = tuple(aggregated.columns[len(op.keys) + 1 :])
        result = aggregated.select(*window_output_columns(op.keys, op.window, names))
        return self.apply_transforms(result, self.transforms)

    def _compact(self) -> None:
        """Merge the pending files into one (one Spark job): partial aggregates are merged
        per key, window and key group; buffered records are copied as they are."""
        from pyspark.sql import functions as F

        op, env = self._op, self.environment
        started = time.perf_counter()
        frame = self._pending_frame()
        if op.plan.decomposable:
            merged = frame.groupBy(*op.keys, WINDOW_START, KEY_GROUP).agg(*op.plan.merge_columns())
            # Keep the partials' types (a sum of decimal sums would widen each compaction).
            types = dict(frame.dtypes)
            frame = merged.select(*[F.col(c).cast(types[c]) for c in merged.columns])
        table = self.collect(frame)
        old = self._files
        self._files = []
        if table.num_rows:
            name = f"{self.tdd.subtask_index:03d}-{self._sequence:06d}-compacted.parquet"
            self._files = [self._local_state_file(table, name)]
        env.metrics.bundles += 1
        self._sequence += 1
        for f in old:
            _remove(f.path)
        logger.info(
            "%s: compacted %d state files into %d rows in %.3f s",
            env.task_name,
            len(old),
            table.num_rows,
            time.perf_counter() - started,
        )

    def _local_state_file(self, table: Any, name: str) -> DataBundle:
        """Write ``table`` (``pyarrow.Table`` with ``__ws``) as a local state file."""
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        self._state_dir.mkdir(parents=True, exist_ok=True)
        path = self._state_dir / name
        pq.write_table(table, path)
        bounds = pc.min_max(table.column(WINDOW_START))
        size = self._op.window.size_ms
        return DataBundle(
            str(path),
            table.num_rows,
            bounds["min"].as_py() // 1000 + size,
            bounds["max"].as_py() // 1000 + size,
        )

    # Checkpoints -------------------------------------------------------------------------------

    def _checkpoint(self, barrier: CheckpointBarrier) -> None:
        """The barrier arrived on every input: snapshot the unfired windows, pre-commit the
        sinks, acknowledge, pass the barrier on.

        Nothing fires here: the gate's watermark may already include watermarks that follow
        the barrier while the bundles before them are still to be accepted; windows ready at
        the barrier fire right after it, and their output belongs to the next checkpoint.
        """
        env = self.environment
        started = time.perf_counter()
        try:
            handles = self._snapshot_keyed_state(barrier.checkpoint_id)
            sink_pending = self.pre_commit(barrier.checkpoint_id)
        except TaskCancelledError:
            raise
        except Exception as error:  # the state cannot be written: decline, run on
            reason = (
                error.reason
                if isinstance(error, CheckpointDeclinedError)
                else f"writing keyed state failed: {type(error).__name__}: {error}"
            )
            if self.tdd.output_partition is not None:
                env.broadcast(barrier)
            logger.warning(
                "%s: declining checkpoint %d: %s", env.task_name, barrier.checkpoint_id, reason
            )
            env.checkpoint_responder.decline_checkpoint(barrier.checkpoint_id, reason)
            return
        snapshot = TaskStateSnapshot(
            keyed_state=handles, sink_pending=sink_pending, watermark_ms=self._fired
        )
        if self.tdd.output_partition is not None:
            env.broadcast(barrier)
        env.checkpoint_responder.acknowledge_checkpoint(barrier.checkpoint_id, snapshot)
        logger.info(
            "%s: checkpoint %d: %d rows of state in %.3f s",
            env.task_name,
            barrier.checkpoint_id,
            sum(h.rows for h in handles),
            time.perf_counter() - started,
        )

    def _pending_table(self) -> Any:
        """The unfired rows of every pending file, as one ``pyarrow.Table`` (or None)."""
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        if not self._files:
            return None
        table = pa.concat_tables(
            [pq.read_table(f.path) for f in self._files], promote_options="default"
        )
        if self._fired > MIN_WATERMARK:
            ends = pc.add(pc.divide(table.column(WINDOW_START), 1000), self._op.window.size_ms - 1)
            table = table.filter(pc.greater(ends, self._fired))
        return table if table.num_rows else None

    def _snapshot_keyed_state(self, checkpoint_id: int) -> tuple[KeyedStateHandle, ...]:
        import fsspec
        import pyarrow.parquet as pq

        table = self._pending_table()
        if table is None:
            return ()
        path = task_state_path(
            self.environment.configuration.get(CheckpointingOptions.CHECKPOINTS_DIR),
            self.tdd.job_id,
            checkpoint_id,
            self.tdd.vertex_id,
            self.tdd.subtask_index,
            self.tdd.attempt_id,
        )
        fs, target = fsspec.core.url_to_fs(path)
        fs.makedirs(os.path.dirname(target), exist_ok=True)
        with fs.open(target, "wb") as f:
            pq.write_table(table, f)
        return (
            KeyedStateHandle(
                path,
                self._key_groups.start,
                self._key_groups.end,
                table.num_rows,
                fs.size(target),
            ),
        )

    def _restore(self, snapshot: TaskStateSnapshot) -> None:
        """Take the rows of this subtask's key groups from the restored state files."""
        import fsspec
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        self._fired = snapshot.watermark_ms
        tables = []
        for handle in snapshot.keyed_state:
            with fsspec.open(handle.path, "rb") as f:
                table = pq.read_table(f)
            groups = table.column(KEY_GROUP)
            mine = pc.and_(
                pc.greater_equal(groups, self._key_groups.start),
                pc.less_equal(groups, self._key_groups.end),
            )
            tables.append(table.filter(mine))
        restored = pa.concat_tables(tables, promote_options="default") if tables else None
        if restored is not None and restored.num_rows:
            self._files.append(self._local_state_file(restored, "restored.parquet"))
        logger.info(
            "%s: restored %d rows of state (key groups %d-%d), fired watermark %d",
            self.environment.task_name,
            0 if restored is None else restored.num_rows,
            self._key_groups.start,
            self._key_groups.end,
            self._fired,
        )


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)
