"""WindowStreamTask: the keyed event-time window operator, chained with transforms and sinks.

State: the exchange files received and not yet fully fired (partial aggregates per key and
window, or buffered records, each row with its key group). When the input gate's watermark (the
minimum over the producers' watermarks) reaches ``window_end - 1`` of some pending window, the
task fires: one Spark job reads the pending files, keeps the windows that became complete since
the last firing, merges partials (or aggregates buffered records) per key and window, applies
the chained transforms and stages the result in the sinks (the plans: ``window_firing``).
Where only sinks follow a tumbling or sliding window of decomposable aggregates without
allowed lateness, Arrow's hash aggregation merges the partials in the task instead, with no
Spark job (``arrow_window_firing``; the same rows and schema).
At the end of bounded input the producers' final MAX watermark fires every remaining window
(Flink's semantics). When too many files accumulate without a firing, they are compacted into
one (one Spark job).

Sliding windows arrive as one row per window and are kept like tumbling ones. Session rows
carry their window's end too; a firing merges each key's sessions, and the sessions still open
(or within their lateness) are written back as the whole state (a second Spark job). With
allowed lateness a file stays until every window of its rows is past its lateness; files
received since the last firing are fresh, and a fresh row of a fired window fires it again.

Checkpoints: when the gate hands over an aligned barrier, the task writes its pending rows (the
unfired windows) as one Parquet file under the checkpoint directory — with pyarrow, no Spark
job; with allowed lateness a ``__fresh`` column keeps the fresh rows apart) — and
acknowledges with that file's key-group range, the fired watermark and the sink data
staged since the previous barrier (pre-commit). Restored, it reads
the rows of its own key groups from the restored files, whatever parallelism wrote them.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any

from millrace.api.operators import WindowAggregateOperator
from millrace.config import ExecutionOptions
from millrace.runtime.checkpoint.task_state_snapshot import TaskStateSnapshot
from millrace.runtime.io import exchange_store
from millrace.runtime.io.partition_events import (
    MIN_WATERMARK,
    CheckpointBarrier,
    DataBundle,
    PartitionEvent,
)
from millrace.spark.arrow_window_firing import arrow_firing_applies, fire_in_arrow
from millrace.spark.exchange import window_end_range_ms
from millrace.spark.input_schemas import InputSchemas
from millrace.spark.keyed_state_files import (
    read_key_groups,
    remove_file,
    write_snapshot,
    write_state_file,
)
from millrace.spark.stream_task import SparkStreamTask
from millrace.spark.window_firing import (
    FRESH,
    compacted_state,
    fired_windows,
    live_rows,
    retained_state,
)
from millrace.spark.windowing import WINDOW_START

__all__ = ["WindowStreamTask"]

logger = logging.getLogger(__name__)


class WindowStreamTask(SparkStreamTask):
    """Runs a keyed window chain.

    Threading:
        ``invoke`` on the task thread.
    """

    def invoke(self) -> None:
        env = self.environment
        op, gate = self.keyed_chain(WindowAggregateOperator, "a window chain")
        self._input_schemas = InputSchemas(self.tdd.input_channels, env.task_name)
        self._open_window(op, self.transforms, env.restore)
        poll_timeout = env.configuration.get(ExecutionOptions.PARTITION_POLL_TIMEOUT)
        max_files = env.configuration.get(ExecutionOptions.STATE_COMPACTION_FILES)
        while not gate.finished:
            env.check_cancelled()
            events = self.poll_input(gate, poll_timeout)
            while events:  # take whatever else already arrived before deciding to fire
                self._accept(events)
                events = self.poll_input(gate, 0) if not gate.finished else []
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

    def _open_window(
        self, op: WindowAggregateOperator, transforms: list[Any], restore: Any
    ) -> None:
        """Set up the window's state (restored from ``restore``, a ``TaskStateSnapshot`` or
        None); ``transforms`` follow the window in the chain."""
        self._op = op
        self._fired_transforms = transforms
        self._files: list[DataBundle] = []
        self._fresh: set[str] = set()  # paths of files received since the last firing
        self._fired = MIN_WATERMARK
        self._sequence = 0
        self._schema: Any = None  # schema of the exchange files, known after the first read
        self._large_var_types: bool | None = None  # the session's, read at the first firing
        if restore is not None:
            self._restore(restore)

    def _accept(self, events: list[tuple[int, PartitionEvent]]) -> None:
        for channel, event in events:
            if isinstance(event, DataBundle):
                self._input_schemas.check(channel, event.path)  # a union's inputs agree
                self._files.append(event)
                self._fresh.add(event.path)
                self.environment.metrics.records_in += event.rows
            elif isinstance(event, CheckpointBarrier):
                self._checkpoint(event)

    # Firing ------------------------------------------------------------------------------------

    def _ready(self, watermark: int) -> bool:
        """Whether some pending window ends at or before ``watermark + 1``: a settled file's
        smallest window end is that of its earliest unfired window, a fresh one's may be a
        fired window's within its lateness (a late firing)."""
        return any(
            f.min_window_end_ms - 1 <= watermark
            if f.min_window_end_ms is not None
            else watermark > self._fired
            for f in self._files
        )

    def _settle(self, bundle: DataBundle, watermark: int) -> DataBundle:
        """``bundle`` after the firing at ``watermark``: its smallest window end is no sooner
        than the earliest a window unfired at ``watermark`` can have."""
        next_end = self._op.window.next_unfired_end_ms(watermark)
        low = bundle.min_window_end_ms
        return replace(bundle, min_window_end_ms=next_end if low is None else max(low, next_end))

    def _pending_frame(self) -> Any:
        """The live state rows; with allowed lateness, ``__fresh`` marks those that arrived
        since the last firing."""
        from pyspark.sql import functions as F

        reader = self.spark.read
        if self._schema is not None:
            reader = reader.schema(self._schema)
        late_firings = self._op.lateness_ms > 0
        parts = []
        for fresh in (False, True):
            paths = [f.path for f in self._files if (f.path in self._fresh) == fresh]
            if paths and late_firings:
                parts.append(reader.parquet(*paths).withColumn(FRESH, F.lit(fresh)))
        if not late_firings:
            parts = [reader.parquet(*[f.path for f in self._files]).withColumn(FRESH, F.lit(False))]
        frame = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
        self._schema = self._schema or frame.drop(FRESH).schema
        if self._fired > MIN_WATERMARK:
            frame = live_rows(frame, self._op, self._fired)
        return frame

    def _fire(self, watermark: int) -> None:
        op, env = self._op, self.environment
        started = time.perf_counter()
        frame: Any = None
        table = None
        if arrow_firing_applies(op, self._fired_transforms):  # no Spark job: Arrow merges partials
            if self._large_var_types is None:
                conf = self.spark.conf.get("spark.sql.execution.arrow.useLargeVarTypes")
                self._large_var_types = conf == "true"
            paths = [f.path for f in self._files]
            table = fire_in_arrow(paths, op, watermark, self._fired, self._large_var_types)
        how = "Arrow" if table is not None else "Spark"
        if table is None:
            frame = self._pending_frame()
            result = fired_windows(frame, op, watermark, self._fired)
            table = self.collect(self.apply_transforms(result, self._fired_transforms))
        env.metrics.records_out += self.write_sinks(table, self._sequence)
        env.metrics.bundles += 1
        self._sequence += 1
        self._fired = max(self._fired, watermark)
        # A file is done once every window of its rows is past its lateness (a session's
        # end is at least its rows' ends: a file holding a live row keeps its session alive).
        done = [
            f
            for f in self._files
            if f.max_window_end_ms is not None
            and f.max_window_end_ms - 1 + op.lateness_ms <= watermark
        ]
        kept = [f for f in self._files if f not in done]
        if op.window.is_merging and kept:
            # sessions are judged whole: the state becomes the sessions still in it
            done = list(self._files)
            self._replace_state(retained_state(frame, op, watermark), "retained")
        else:
            self._files = [self._settle(f, watermark) for f in kept]
        self._fresh.clear()
        for f in done:
            remove_file(f.path)
        logger.info(
            "%s: fired at watermark %d: %d rows from %d files in %.3f s (%s)",
            env.task_name,
            watermark,
            table.num_rows,
            len(done),
            time.perf_counter() - started,
            how,
        )

    def _replace_state(self, frame: Any, label: str) -> Any:
        """Run ``frame`` (one Spark job) and make its rows the whole state, settled."""
        table = self.collect(frame)
        self._files = []
        if table.num_rows:
            name = f"{self.tdd.subtask_index:03d}-{self._sequence:06d}-{label}.parquet"
            self._files = [self._settle(self._local_state_file(table, name), self._fired)]
        self.environment.metrics.bundles += 1
        self._sequence += 1
        return table

    def _compact(self) -> None:
        """Merge the pending files into one (one Spark job): partial aggregates are merged
        per key, window and key group (sessions merged first); buffered records are copied.
        Nothing pending is due (else the task fires instead), so every row is settled."""
        env = self.environment
        started = time.perf_counter()
        old = self._files
        table = self._replace_state(compacted_state(self._pending_frame(), self._op), "compacted")
        self._fresh.clear()
        for f in old:
            remove_file(f.path)
        logger.info(
            "%s: compacted %d state files into %d rows in %.3f s",
            env.task_name,
            len(old),
            table.num_rows,
            time.perf_counter() - started,
        )

    def _local_state_file(self, table: Any, name: str) -> DataBundle:
        """Write ``table`` (``pyarrow.Table`` with ``__ws``) as a live state file."""
        path = write_state_file(table, self.state_dir, name)
        low, high = window_end_range_ms(table, self._op.window.size_ms)
        return DataBundle(path, table.num_rows, low, high)

    # Checkpoints -------------------------------------------------------------------------------

    def _checkpoint(self, barrier: CheckpointBarrier) -> None:
        """The barrier arrived on every input: snapshot the unfired windows, pre-commit the
        sinks, acknowledge, pass the barrier on (``acknowledge_keyed``).

        Nothing fires here: the gate's watermark may already include watermarks that follow
        the barrier while the bundles before them are still to be accepted; windows ready at
        the barrier fire right after it, and their output belongs to the next checkpoint.
        """
        self.acknowledge_keyed(
            barrier,
            lambda: write_snapshot(
                self._pending_table(),
                self.environment.configuration,
                self.tdd,
                barrier.checkpoint_id,
                self.key_groups,
            ),
            self._fired,
        )

    def _pending_table(self) -> Any:
        """The unfired rows of every pending file, as one ``pyarrow.Table`` (or None)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if not self._files:
            return None
        op = self._op
        tables = []
        for f in self._files:
            table = exchange_store.read_parquet(f.path)
            if op.lateness_ms:  # rows that arrived since the last firing: a late firing is due
                fresh = pa.array([f.path in self._fresh] * table.num_rows, pa.bool_())
                table = table.append_column(FRESH, fresh)
            tables.append(table)
        table = pa.concat_tables(tables, promote_options="default")
        if self._fired > MIN_WATERMARK and not op.window.is_merging:
            last = op.window.size_ms - 1 + op.lateness_ms
            ends = pc.add(pc.divide(table.column(WINDOW_START), 1000), last)
            table = table.filter(pc.greater(ends, self._fired))
        return table if table.num_rows else None

    def _restore(self, snapshot: TaskStateSnapshot) -> None:
        """Take the rows of this subtask's key groups from the restored state files."""
        import pyarrow.compute as pc

        self._fired = snapshot.watermark_ms
        restored = read_key_groups(snapshot, self.key_groups)
        if restored is not None:
            fresh = None
            if FRESH in restored.column_names:
                fresh = restored.column(FRESH)
                restored = restored.drop_columns([FRESH])
            for label, rows in (
                ("restored", restored if fresh is None else restored.filter(pc.invert(fresh))),
                ("restored-fresh", None if fresh is None else restored.filter(fresh)),
            ):
                if rows is not None and rows.num_rows:
                    bundle = self._local_state_file(rows, f"{label}.parquet")
                    if label == "restored":
                        self._files.append(self._settle(bundle, self._fired))
                    else:
                        self._files.append(bundle)
                        self._fresh.add(bundle.path)
        logger.info(
            "%s: restored %d rows of state (key groups %d-%d), fired watermark %d",
            self.environment.task_name,
            0 if restored is None else restored.num_rows,
            self.key_groups.start,
            self.key_groups.end,
            self._fired,
        )
