"""A source chain with its keyed stage chained into the same task (STREAMING, parallelism 1).

A keyed vertex of parallelism 1 fed by a source vertex of parallelism 1 gets every record over
its HASH edge: the edge is forward in effect, and the two are chained in STREAMING as in BATCH
(``api/keyed_chaining.py``; Flink chains operators joined by a forward edge, seed 002). The
task reads bundles as ``SourceStreamTask`` does, and each bundle's Spark job ends in the keyed
stage's partials (or records), as before. Those rows do not go through an exchange file and a
consumer task: they become the keyed stage's state at once (one state file, written with
pyarrow). The keyed stage then acts in this task as its own task would on its input:

- ``WindowChainStreamTask``: after each watermark the source emits, the windows it completed
  fire, as ``WindowStreamTask`` fires on its input gate's watermark (in Arrow where only sinks
  follow, else one Spark job).
- ``RunningAggregateChainStreamTask``: the changed keys are emitted at each checkpoint (an
  unbounded job; after each bundle with checkpointing off) or once at the end of bounded
  input, as ``KeyedAggregateStreamTask`` emits.

Both run on the task thread, one after the other: nothing fires between a bundle boundary and
the barrier taken there.

Checkpoints: at a bundle boundary the task snapshots the split positions (the source's part)
and the keyed state with its watermark (in ``TaskStateSnapshot.chained``), pre-commits every
sink and acknowledges once. The JobMaster stores the two parts under the two vertices' ids
(``runtime/checkpoint/chained_state.py``), so a checkpoint restores into the chain or into the
two vertices alike.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from millrace.api.operators import (
    KeyedAggregateOperator,
    TransformOperator,
    WindowAggregateOperator,
)
from millrace.config import ExecutionOptions
from millrace.errors import CheckpointDeclinedError, PipelineError
from millrace.runtime.checkpoint.task_state_snapshot import ChainedKeyedState, TaskStateSnapshot
from millrace.runtime.io.partition_events import MAX_WATERMARK
from millrace.spark.keyed_aggregate_stream_task import KeyedAggregateStreamTask
from millrace.spark.keyed_state_files import concat_tables, write_snapshot, write_state_file
from millrace.spark.source_stream_task import SourceStreamTask
from millrace.spark.window_stream_task import WindowStreamTask
from millrace.spark.windowing import TARGET

__all__ = ["KeyedChainStreamTask", "RunningAggregateChainStreamTask", "WindowChainStreamTask"]

logger = logging.getLogger(__name__)


class KeyedChainStreamTask(SourceStreamTask):
    """Runs ``source chain, keyed chain, source side outputs`` in one task: what the two
    chained tasks below share. The keyed chain starts with a ``keyed_kind`` operator.

    Threading:
        ``invoke`` on the task thread.
    """

    keyed_kind: type = object

    def _open(self, max_records: int) -> None:
        """The source's reader and bookkeeping, then the keyed stage's state (restored from
        the chained part of the restore snapshot).

        Raises:
            PipelineError: If the chain has no source chain before a ``keyed_kind`` operator,
                or no sink.
        """
        super()._open(max_records)
        env = self.environment
        at = next((i for i, op in enumerate(self.operators) if isinstance(op, self.keyed_kind)), 0)
        if at == 0 or not self.sinks:
            raise PipelineError(
                f"a keyed chain needs a source chain, a {self.keyed_kind.__name__} and a sink",
                env.task_name,
            )
        self._tail = self.operators[at - 1]  # the source chain's local keyed step
        self.transforms = [op for op in self.operators[:at] if isinstance(op, TransformOperator)]
        after = [op for op in self.operators[at + 1 :] if isinstance(op, TransformOperator)]
        self._max_files = env.configuration.get(ExecutionOptions.STATE_COMPACTION_FILES)
        chained = env.restore.chained if env.restore is not None else None
        restore = None
        if chained is not None:  # as the keyed vertex restores: its keyed state, its watermark
            restore = TaskStateSnapshot(
                keyed_state=chained.keyed_state, watermark_ms=chained.watermark_ms
            )
        self._open_keyed(self.operators[at], after, restore)

    def _exchange(self, table: Any, sequence: int, window_size_ms: int | None) -> None:
        """The bundle's keyed rows (``pyarrow.Table`` with ``__target``) become keyed state:
        no exchange file, no consumer."""
        if table.num_rows:
            name = f"{self.tdd.subtask_index:03d}-{sequence:06d}-bundle.parquet"
            self._take_rows(table.drop_columns([TARGET]), name)

    def _chained_snapshot(self, checkpoint_id: int) -> ChainedKeyedState | None:
        """The keyed stage's part of a checkpoint: its state files and watermark.

        Raises:
            CheckpointDeclinedError: If the state cannot be written.
        """
        started = time.perf_counter()
        try:
            handles = write_snapshot(
                self._state_table(),
                self.environment.configuration,
                self.tdd,
                checkpoint_id,
                self.key_groups,
            )
        except Exception as error:
            raise CheckpointDeclinedError(
                checkpoint_id, f"writing keyed state failed: {type(error).__name__}: {error}"
            ) from error
        logger.info(
            "%s: checkpoint %d: %d rows of state in %.3f s",
            self.environment.task_name,
            checkpoint_id,
            sum(h.rows for h in handles),
            time.perf_counter() - started,
        )
        return ChainedKeyedState(handles, self._keyed_watermark())

    def _open_keyed(self, op: Any, transforms: list[Any], restore: Any) -> None:
        raise NotImplementedError

    def _take_rows(self, table: Any, name: str) -> None:
        raise NotImplementedError

    def _state_table(self) -> Any:
        raise NotImplementedError

    def _keyed_watermark(self) -> int:
        raise NotImplementedError


class WindowChainStreamTask(KeyedChainStreamTask, WindowStreamTask):
    """A window chained into its source: fires after each watermark the source emits.

    Threading:
        ``invoke`` on the task thread.
    """

    keyed_kind = WindowAggregateOperator

    def invoke(self) -> None:
        SourceStreamTask.invoke(self)
        if self._ready(MAX_WATERMARK):  # the end of bounded input fires every window left
            self._fire(MAX_WATERMARK)
        self.report_clock(MAX_WATERMARK, force=True)

    def _open_keyed(self, op: Any, transforms: list[Any], restore: Any) -> None:
        self._open_window(op, transforms, restore)
        restored = self._tracker.emitted  # restored from two vertices, the window may lag
        if self._ready(restored):
            self._fire(restored)

    def _take_rows(self, table: Any, name: str) -> None:
        bundle = self._local_state_file(table, name)
        self._files.append(bundle)
        self._fresh.add(bundle.path)

    def _emit_watermark(self, watermark: int | None) -> None:
        """Emit as the source does, then fire what is due at the source's watermark, moved or
        not (windows it completed; with allowed lateness, fired windows that late records
        reached), as a window task does after every input; else compact the state when too
        many files wait (never with a firing due: compaction keeps no fresh rows)."""
        super()._emit_watermark(watermark)
        current = self._tracker.emitted
        if self._ready(current):
            self._fire(current)
        elif len(self._files) > self._max_files:
            self._compact()

    def _state_table(self) -> Any:
        return self._pending_table()

    def _keyed_watermark(self) -> int:
        return self._fired

    def report_clock(self, watermark_ms: int, *, force: bool = False) -> None:
        """The task's clock is the window's: no later than its fired watermark."""
        super().report_clock(min(watermark_ms, self._fired), force=force)


class RunningAggregateChainStreamTask(KeyedChainStreamTask, KeyedAggregateStreamTask):
    """A running aggregate chained into its source: emits the changed keys at each
    checkpoint, or once at the end of bounded input.

    Threading:
        ``invoke`` on the task thread.
    """

    keyed_kind = KeyedAggregateOperator

    def invoke(self) -> None:
        SourceStreamTask.invoke(self)
        if self._op.bounded:  # one final row per key
            self._fresh = [*self._settled, *self._fresh]
            self._settled = []
        if self._fresh:
            self._emit()

    def _open_keyed(self, op: Any, transforms: list[Any], restore: Any) -> None:
        self._open_aggregate(op, transforms, restore)

    def _take_rows(self, table: Any, name: str) -> None:
        self._fresh.append(write_state_file(table, self.state_dir, name))
        if self._emit_per_batch:
            self._emit()
        for files in (self._settled, self._fresh):
            if len(files) > self._max_files:
                self._compact(files)

    def _chained_snapshot(self, checkpoint_id: int) -> ChainedKeyedState | None:
        """Emit the keys changed since the last checkpoint (an unbounded job), so that this
        checkpoint commits them, then snapshot the state.

        Raises:
            CheckpointDeclinedError: If the state cannot be written.
            PipelineError: If the emission's Spark job fails (the task fails: the output of
                the barrier is due).
        """
        if not self._op.bounded and self._fresh:
            self._emit()
        return super()._chained_snapshot(checkpoint_id)

    def _state_table(self) -> Any:
        return concat_tables([*self._settled, *self._fresh])

    def _keyed_watermark(self) -> int:
        return self._tracker.emitted
