"""KeyedAggregateStreamTask: the running keyed aggregate (no window), chained with transforms
and sinks.

State: the exchange files received (partial aggregates per key, or records, each row with its
key group), split into *settled* files, whose keys were emitted already, and *fresh* ones,
received since the last emission. Emitting is one Spark job: every key of the fresh files with
its aggregates over all the state, through the chained transforms into the sinks.

When it emits (Flink SQL's streaming GROUP BY, as upserts on the keys):

- a job whose sources are all bounded: once, every key, when the input ends (one final row
  per key);
- an unbounded job: at every checkpoint barrier, the keys that changed since the previous
  barrier, before the sinks pre-commit, so each checkpoint commits the new values of the keys
  its input changed; with checkpointing off, after every batch of input.

Files are compacted (one Spark job, partials merged per key) when more than
``state.compaction.max-files`` accumulate, settled and fresh apart. Checkpoints snapshot the
state rows with pyarrow (``keyed_state_files``); a restored task takes the rows of its key
groups, whatever parallelism wrote them, as settled state.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from millrace.api.operators import KeyedAggregateOperator
from millrace.config import CheckpointingOptions, ExecutionOptions
from millrace.runtime.checkpoint.task_state_snapshot import TaskStateSnapshot
from millrace.runtime.io.partition_events import CheckpointBarrier, DataBundle, PartitionEvent
from millrace.spark.input_schemas import InputSchemas
from millrace.spark.keyed_state_files import (
    concat_tables,
    read_key_groups,
    remove_file,
    write_snapshot,
    write_state_file,
)
from millrace.spark.running_aggregation import compacted_state, emitted_rows
from millrace.spark.stream_task import SparkStreamTask

__all__ = ["KeyedAggregateStreamTask"]

logger = logging.getLogger(__name__)


class KeyedAggregateStreamTask(SparkStreamTask):
    """Runs a running-aggregate chain.

    Threading:
        ``invoke`` on the task thread.
    """

    _settled: list[str]  # state files whose keys were emitted
    _fresh: list[str]  # state files received since the last emission

    def invoke(self) -> None:
        env = self.environment
        op, gate = self.keyed_chain(KeyedAggregateOperator, "a running-aggregate chain")
        self._input_schemas = InputSchemas(self.tdd.input_channels, env.task_name)
        self._gate = gate
        self._open_aggregate(op, self.transforms, env.restore)
        conf = env.configuration
        poll_timeout = conf.get(ExecutionOptions.PARTITION_POLL_TIMEOUT)
        max_files = conf.get(ExecutionOptions.STATE_COMPACTION_FILES)
        while not gate.finished:
            env.check_cancelled()
            events = self.poll_input(gate, poll_timeout)
            while events:  # take whatever else already arrived
                self._accept(events)
                events = self.poll_input(gate, 0) if not gate.finished else []
            if self._emit_per_batch and self._fresh:
                self._emit()
            for files in (self._settled, self._fresh):
                if len(files) > max_files:
                    self._compact(files)
            self.report_clock(gate.watermark)
            self.report_progress()
        if op.bounded:
            self._fresh = [*self._settled, *self._fresh]
            self._settled = []
        if self._fresh:
            self._emit()
        self.report_clock(gate.watermark, force=True)
        gate.close()

    def _open_aggregate(
        self, op: KeyedAggregateOperator, transforms: list[Any], restore: Any
    ) -> None:
        """Set up the aggregate's state (restored from ``restore``, a ``TaskStateSnapshot`` or
        None); ``transforms`` follow the aggregate in the chain."""
        self._op = op
        self._emitted_transforms = transforms
        self._settled = []
        self._fresh = []
        self._sequence = 0
        self._schema: Any = None
        interval = self.environment.configuration.get(CheckpointingOptions.INTERVAL)
        self._emit_per_batch = not op.bounded and not interval
        if restore is not None:
            self._restore(restore)

    def _accept(self, events: list[tuple[int, PartitionEvent]]) -> None:
        for channel, event in events:
            if isinstance(event, DataBundle):
                self._input_schemas.check(channel, event.path)  # a union's inputs agree
                self._fresh.append(event.path)
                self.environment.metrics.records_in += event.rows
            elif isinstance(event, CheckpointBarrier):
                self._checkpoint(event)

    def _frame_schema(self, paths: list[str]) -> Any:
        if self._schema is None:
            self._schema = self.spark.read.parquet(*paths).schema
        return self._schema

    def _emit(self) -> None:
        """One Spark job: the fresh keys' aggregates over all state, through the chained
        transforms, staged in the sinks; the fresh files become settled."""
        env = self.environment
        started = time.perf_counter()
        schema = self._frame_schema([*self._settled, *self._fresh])
        result = emitted_rows(self.spark, self._op, self._settled, self._fresh, schema)
        table = self.collect(self.apply_transforms(result, self._emitted_transforms))
        env.metrics.records_out += self.write_sinks(table, self._sequence)
        env.metrics.bundles += 1
        self._sequence += 1
        emitted_from = len(self._fresh)
        self._settled += self._fresh
        self._fresh = []
        logger.info(
            "%s: emitted %d keys changed by %d files in %.3f s",
            env.task_name,
            table.num_rows,
            emitted_from,
            time.perf_counter() - started,
        )

    def _compact(self, files: list[str]) -> None:
        """Merge ``files`` (the settled or the fresh list, replaced in place) into one file."""
        env = self.environment
        started = time.perf_counter()
        schema = self._frame_schema(files)
        table = self.collect(compacted_state(self.spark, self._op, files, schema))
        old = list(files)
        files.clear()
        if table.num_rows:
            name = f"{self.tdd.subtask_index:03d}-{self._sequence:06d}-compacted.parquet"
            files.append(write_state_file(table, self.state_dir, name))
        self._sequence += 1
        for path in old:
            remove_file(path)
        logger.info(
            "%s: compacted %d state files into %d rows in %.3f s",
            env.task_name,
            len(old),
            table.num_rows,
            time.perf_counter() - started,
        )

    # Checkpoints -------------------------------------------------------------------------------

    def _checkpoint(self, barrier: CheckpointBarrier) -> None:
        """The barrier arrived on every input: emit the changed keys (unbounded job), then
        snapshot the state, pre-commit the sinks and acknowledge (``acknowledge_keyed``)."""
        if not self._op.bounded and self._fresh:
            self._emit()  # a failure here fails the task: the output of the barrier is due
        self.acknowledge_keyed(
            barrier,
            lambda: write_snapshot(
                concat_tables([*self._settled, *self._fresh]),
                self.environment.configuration,
                self.tdd,
                barrier.checkpoint_id,
                self.key_groups,
            ),
            self._gate.watermark,
        )

    def _restore(self, snapshot: TaskStateSnapshot) -> None:
        """Take the rows of this subtask's key groups from the restored state, as settled."""
        restored = read_key_groups(snapshot, self.key_groups)
        if restored is not None:
            self._settled.append(write_state_file(restored, self.state_dir, "restored.parquet"))
        logger.info(
            "%s: restored %d rows of state (key groups %d-%d)",
            self.environment.task_name,
            0 if restored is None else restored.num_rows,
            self.key_groups.start,
            self.key_groups.end,
        )
