"""KeyedChainStreamTask: a source chain with its keyed window chained into the same task.

A window vertex of parallelism 1 fed by a source vertex of parallelism 1 gets every record
over its HASH edge: the edge is forward in effect, and the two are chained in STREAMING as in
BATCH (``api/keyed_chaining.py``; Flink chains operators joined by a forward edge, seed 002).
The task reads bundles as ``SourceStreamTask`` does, and each bundle's Spark job ends in the
window's partials (or records with their windows), as before. Those rows do not go through an
exchange file and a consumer task: they become the window's state at once (one live state
file, written with pyarrow), and after each watermark the source emits, the window fires in
this task as ``WindowStreamTask`` fires on its input gate's watermark (in Arrow where only
sinks follow, else one Spark job). Nothing fires between a barrier and its bundle boundary:
both run on the task thread, one after the other.

Checkpoints: at a bundle boundary the task snapshots the split positions (the source's part)
and the unfired windows with the fired watermark (the window's part, in
``TaskStateSnapshot.chained``), pre-commits every sink and acknowledges once. The JobMaster
stores the two parts under the two vertices' ids (``runtime/checkpoint/chained_state.py``), so
a checkpoint restores into the chain or into the two vertices alike.
"""

from __future__ import annotations

import logging
from typing import Any

from millrace.api.operators import SinkOperator, TransformOperator, WindowAggregateOperator
from millrace.config import ExecutionOptions
from millrace.errors import CheckpointDeclinedError, PipelineError
from millrace.runtime.checkpoint.task_state_snapshot import ChainedKeyedState, TaskStateSnapshot
from millrace.runtime.io.partition_events import MAX_WATERMARK
from millrace.spark.keyed_state_files import write_snapshot
from millrace.spark.source_stream_task import SourceStreamTask
from millrace.spark.window_stream_task import WindowStreamTask
from millrace.spark.windowing import TARGET

__all__ = ["KeyedChainStreamTask"]

logger = logging.getLogger(__name__)


class KeyedChainStreamTask(SourceStreamTask, WindowStreamTask):
    """Runs ``source chain, window chain, source side outputs`` in one task.

    Threading:
        ``invoke`` on the task thread.
    """

    def invoke(self) -> None:
        SourceStreamTask.invoke(self)
        if self._ready(MAX_WATERMARK):  # the end of bounded input fires every window left
            self._fire(MAX_WATERMARK)
        self.report_clock(MAX_WATERMARK, force=True)

    def _open(self, max_records: int) -> None:
        """The source's reader and bookkeeping, then the window's state (restored from the
        chained part of the restore snapshot)."""
        super()._open(max_records)
        env = self.environment
        window_at = next(
            (i for i, op in enumerate(self.operators) if isinstance(op, WindowAggregateOperator)),
            None,
        )
        if window_at is None or window_at == 0 or not self.sinks:
            raise PipelineError(
                "a keyed chain needs a source chain, a window and a sink", env.task_name
            )
        window = self.operators[window_at]
        self._tail = self.operators[window_at - 1]  # the source chain's local window step
        self.transforms = [
            op for op in self.operators[:window_at] if isinstance(op, TransformOperator)
        ]
        after = [
            op
            for op in self.operators[window_at + 1 :]
            if isinstance(op, TransformOperator) and not isinstance(op, SinkOperator)
        ]
        self._max_files = env.configuration.get(ExecutionOptions.STATE_COMPACTION_FILES)
        chained = env.restore.chained if env.restore is not None else None
        restore = None
        if chained is not None:  # as the window vertex restores: its keyed state, its watermark
            restore = TaskStateSnapshot(
                keyed_state=chained.keyed_state, watermark_ms=chained.watermark_ms
            )
        self._open_window(window, after, restore)

    def _exchange(self, table: Any, sequence: int, window_size_ms: int | None) -> None:
        """The bundle's windowed rows (``pyarrow.Table`` with ``__target``) become a live
        state file of the window: no exchange file, no consumer."""
        if table.num_rows == 0:
            return
        name = f"{self.tdd.subtask_index:03d}-{sequence:06d}-bundle.parquet"
        bundle = self._local_state_file(table.drop_columns([TARGET]), name)
        self._files.append(bundle)
        self._fresh.add(bundle.path)

    def _emit_watermark(self, watermark: int | None) -> None:
        """Emit as the source does, then fire the windows the watermark completed (or compact
        the state when too many files wait)."""
        super()._emit_watermark(watermark)
        if watermark is not None and self._ready(watermark):
            self._fire(watermark)
        elif len(self._files) > self._max_files:
            self._compact()

    def _chained_snapshot(self, checkpoint_id: int) -> ChainedKeyedState | None:
        """The window's part of a checkpoint: its unfired windows and fired watermark.

        Raises:
            CheckpointDeclinedError: If the state cannot be written.
        """
        try:
            handles = write_snapshot(
                self._pending_table(),
                self.environment.configuration,
                self.tdd,
                checkpoint_id,
                self.key_groups,
            )
        except Exception as error:
            raise CheckpointDeclinedError(
                checkpoint_id, f"writing keyed state failed: {type(error).__name__}: {error}"
            ) from error
        return ChainedKeyedState(handles, self._fired)

    def report_clock(self, watermark_ms: int, *, force: bool = False) -> None:
        """The task's clock is the window's: no later than its fired watermark."""
        super().report_clock(min(watermark_ms, self._fired), force=force)
