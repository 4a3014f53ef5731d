"""TwoInputStreamTask: common ground of the keyed two-input operators (the joins).

Both inputs arrive through one InputGate: its watermark is the minimum over the channels of
both inputs, and a checkpoint barrier is aligned over all of them (EXACTLY_ONCE), so a
snapshot holds exactly the rows of both inputs before the barrier. Each channel names its input
(``InputChannelDescriptor.input_index``: 0 the first, 1 the second). State is per input: the
exchange files received (rows with ``__ws`` and their key group ``__kg``), which the
subclasses join with Spark. At a barrier the live rows of each input are written with pyarrow
as one Parquet file per input (no Spark job), the input in the file's metadata; restored, a
subtask keeps the rows of its key groups, whatever parallelism wrote them (as the window
operator does).

Subclasses implement ``_open`` (check the chain's join operator), ``pairs`` (the join's Spark
plan over rows of both inputs, shared with the BATCH tasks of ``batch_two_input_task``),
``_on_bundle`` (a file arrived), ``_advance`` (the events at hand are taken: join, fire,
expire), ``_before_snapshot`` and ``_live``/``_restored`` (which rows are state).
"""

from __future__ import annotations

import logging
from typing import Any

from millrace.config import ExecutionOptions
from millrace.errors import PipelineError
from millrace.runtime.checkpoint.task_state_snapshot import KeyedStateHandle, TaskStateSnapshot
from millrace.runtime.io.partition_events import (
    MIN_WATERMARK,
    CheckpointBarrier,
    DataBundle,
    PartitionEvent,
)
from millrace.spark.exchange import window_end_range_ms
from millrace.spark.input_schemas import InputSchemas
from millrace.spark.keyed_state_files import (
    concat_tables,
    key_group_tables,
    remove_file,
    write_snapshot,
    write_state_file,
)
from millrace.spark.stream_task import SparkStreamTask
from millrace.spark.windowing import KEY_GROUP, WINDOW_START

__all__ = ["INPUT_METADATA", "TwoInputStreamTask", "joined_columns"]

logger = logging.getLogger(__name__)

INPUT_METADATA = b"millrace.input"
"""Parquet metadata key of a two-input state file: the input (``0`` or ``1``) of its rows."""

_INTERNAL = (WINDOW_START, KEY_GROUP)


class TwoInputStreamTask(SparkStreamTask):
    """Runs a keyed two-input chain (join, transforms, sinks).

    Threading:
        ``invoke`` on the task thread.
    """

    window_size_ms: int = 1  # of ``__ws`` (a local state file's window-end bounds)

    def invoke(self) -> None:
        env = self.environment
        gate = env.input_gate
        if gate is None:
            raise PipelineError("a join chain needs an input gate", env.task_name)
        self.open_inputs()
        if env.restore is not None:
            self._restore(env.restore)
        poll_timeout = env.configuration.get(ExecutionOptions.PARTITION_POLL_TIMEOUT)
        self.max_files = env.configuration.get(ExecutionOptions.STATE_COMPACTION_FILES)
        while not gate.finished:
            env.check_cancelled()
            events = self.poll_input(gate, poll_timeout)
            while events:  # take whatever else already arrived before joining
                self._accept(events, gate.watermark)
                events = self.poll_input(gate, 0) if not gate.finished else []
            self._advance(gate.watermark)
            self.report_clock(self.fired)
            self.report_progress()
        self._advance(gate.watermark)
        self.report_clock(self.fired, force=True)
        gate.close()

    def open_inputs(self) -> None:
        """Check the chain (``_open``) and set up the per-input state of ``invoke``.

        Raises:
            PipelineError: If the chain has no sink or does not start with its join operator.

        Threading:
            The task thread.
        """
        env = self.environment
        if not self.sinks:
            raise PipelineError("a join chain needs a sink", env.task_name)
        self._open()
        self.op = self.operators[0]
        self.left_keys: tuple[str, ...] = self.op.left_keys
        self.right_keys: tuple[str, ...] = self.op.right_keys
        self.files: tuple[list[DataBundle], list[DataBundle]] = ([], [])
        self.fired = MIN_WATERMARK
        self.sequence = 0
        self._inputs = [c.input_index for c in self.tdd.input_channels]
        self._schemas = InputSchemas(self.tdd.input_channels, env.task_name)
        self._keys_checked = False

    def check_input_file(self, channel: int, path: str) -> None:
        """Check ``path``, arrived on ``channel``, against its input's schema and, once both
        inputs' schemas are known, the key columns of the two inputs.

        Raises:
            PipelineError: If the file's schema differs from its input's first file, a key
                column is missing, or the keys of the two inputs have different types.

        Threading:
            The task thread.
        """
        self._schemas.check(channel, path)
        self._check_keys()

    def _accept(self, events: list[tuple[int, PartitionEvent]], watermark: int) -> None:
        for channel, event in events:
            if isinstance(event, DataBundle):
                self.check_input_file(channel, event.path)
                self.environment.metrics.records_in += event.rows
                self._on_bundle(self._inputs[channel], event)
            elif isinstance(event, CheckpointBarrier):
                self._before_snapshot()
                self._checkpoint(event)

    # For subclasses ----------------------------------------------------------------------------

    def _open(self) -> None:
        """Check the chain's operators and set up the subclass's own fields.

        Raises:
            PipelineError: If the chain does not start with the subclass's join operator.
        """
        raise NotImplementedError

    def pairs(self, left: Any, right: Any, condition: Any = None) -> Any:
        """The joined rows of ``left`` and ``right`` (lazy DataFrames of the two inputs' rows,
        with ``__ws`` and ``__kg``): every pair the join matches (and ``condition`` too, a
        Column over ``l.`` and ``r.`` columns, when given), with the output columns.

        Schema:
            The subclass's output schema, one row per matching pair.

        Threading:
            The task thread (builds a plan; runs no Spark job).
        """
        raise NotImplementedError

    def _on_bundle(self, side: int, bundle: DataBundle) -> None:
        self.files[side].append(bundle)

    def _advance(self, watermark: int) -> None:
        raise NotImplementedError

    def _before_snapshot(self) -> None:
        """At an aligned barrier, before the state is written."""

    def _live(self, side: int, table: Any) -> Any:
        """The rows of ``table`` (``pyarrow.Table`` of input ``side``) that are still state."""
        return table

    def _restored(self, side: int, bundle: DataBundle) -> None:
        self.files[side].append(bundle)

    # Spark -------------------------------------------------------------------------------------

    def read(self, paths: list[str], side: int) -> Any:
        """The rows of the Parquet files ``paths`` (of input ``side``) as a lazy DataFrame
        (no job), read with the input's schema from its first file's footer."""
        reader = self.spark.read
        schema = self._spark_schema(side)
        if schema is not None:
            reader = reader.schema(schema)
        return reader.parquet(*paths)

    def _spark_schema(self, side: int) -> Any:
        arrow = self._schemas.schemas.get(side)
        if arrow is None:
            return None
        from pyspark.sql.pandas.types import from_arrow_schema

        return from_arrow_schema(arrow)

    def emit(self, frame: Any) -> int:
        """Apply the chained transforms to ``frame``, run it (one Spark job), stage the
        result in the sinks; returns the rows."""
        table = self.collect(self.apply_transforms(frame, self.transforms))
        rows = self.write_sinks(table, self.sequence)
        self.environment.metrics.records_out += rows
        self.environment.metrics.bundles += 1
        self.sequence += 1
        return int(rows)

    def joined(self, left: Any, right: Any, condition: Any) -> Any:
        """``left`` (alias ``l``) joined with ``right`` (alias ``r``) on the keys and
        ``condition``; the output columns of ``joined_columns`` are selected by the caller."""
        from pyspark.sql import functions as F

        on = condition
        for a, b in zip(self.left_keys, self.right_keys, strict=True):
            on = on & (F.col(f"l.`{a}`") == F.col(f"r.`{b}`"))
        return left.alias("l").join(right.alias("r"), on, "inner")

    def output_columns(self) -> list[Any]:
        """The joined row's columns: the first input's, then the second's (see
        ``joined_columns``)."""
        from pyspark.sql import functions as F

        left = [f.name for f in self._schemas.schemas[0]]
        right = [f.name for f in self._schemas.schemas[1]]
        return [
            F.col(f"{side}.`{name}`").alias(out)
            for side, name, out in joined_columns(
                left, right, self.left_keys, self.right_keys, self.op.suffix
            )
        ]

    def _check_keys(self) -> None:
        schemas = self._schemas.schemas
        if self._keys_checked or 0 not in schemas or 1 not in schemas:
            return
        self._keys_checked = True
        for side, keys in ((0, self.left_keys), (1, self.right_keys)):
            missing = [k for k in keys if k not in schemas[side].names]
            if missing:
                raise PipelineError(
                    f"{self.op.name}: key columns {missing} are not in input {side} "
                    f"(columns: {schemas[side].names})",
                    self.environment.task_name,
                )
        for a, b in zip(self.left_keys, self.right_keys, strict=True):
            left_type = schemas[0].field(a).type
            right_type = schemas[1].field(b).type
            if left_type != right_type:
                raise PipelineError(
                    f"{self.op.name}: key {a!r} of the first input is {left_type} but key "
                    f"{b!r} of the second is {right_type}; cast one with transform() so that "
                    "both have one type",
                    self.environment.task_name,
                )

    # State files -------------------------------------------------------------------------------

    def local_state_file(self, table: Any, side: int, name: str) -> DataBundle:
        """Write ``table`` (``pyarrow.Table`` with ``__ws``) as a live state file of ``side``."""
        path = write_state_file(table, self.state_dir, f"in{side}-{name}")
        low, high = window_end_range_ms(table, self.window_size_ms)
        return DataBundle(path, table.num_rows, low, high)

    def compact(self, side: int) -> None:
        """Merge the files of ``side`` into one, keeping their live rows (pyarrow, no Spark
        job)."""
        table = self._live_table(side)
        old = list(self.files[side])
        self.files[side].clear()
        if table is not None:
            name = f"{self.sequence:06d}-{len(old)}-compacted.parquet"
            self.files[side].append(self.local_state_file(table, side, name))
        for f in old:
            remove_file(f.path)

    def _live_table(self, side: int) -> Any:
        table = concat_tables([f.path for f in self.files[side]])
        if table is None:
            return None
        table = self._live(side, table.replace_schema_metadata(None))
        return table if table.num_rows else None

    # Checkpoints -------------------------------------------------------------------------------

    def _checkpoint(self, barrier: CheckpointBarrier) -> None:
        """The barrier arrived on every channel of both inputs: write each input's live rows,
        pre-commit the sinks, acknowledge, or decline and run on (``acknowledge_keyed``)."""
        self.acknowledge_keyed(
            barrier,
            lambda: tuple(
                h for side in (0, 1) for h in self._snapshot_side(side, barrier.checkpoint_id)
            ),
            self.fired,
        )

    def _snapshot_side(self, side: int, checkpoint_id: int) -> tuple[KeyedStateHandle, ...]:
        table = self._live_table(side)
        if table is None:
            return ()
        return write_snapshot(
            table.replace_schema_metadata({INPUT_METADATA: str(side).encode()}),
            self.environment.configuration,
            self.tdd,
            checkpoint_id,
            self.key_groups,
            part=f"-in{side}",
        )

    def _restore(self, snapshot: TaskStateSnapshot) -> None:
        """Take the rows of this subtask's key groups from the restored files of each input."""
        import pyarrow as pa

        self.fired = snapshot.watermark_ms
        tables: dict[int, list[Any]] = {0: [], 1: []}
        for table in key_group_tables(snapshot, self.key_groups):
            side = int((table.schema.metadata or {}).get(INPUT_METADATA, b"-1"))
            if side not in tables:
                raise PipelineError(
                    "a restored state file is not a two-input operator's (no input in its "
                    "metadata)",
                    self.environment.task_name,
                )
            tables[side].append(table.replace_schema_metadata(None))
        for side, parts in tables.items():
            restored = pa.concat_tables(parts, promote_options="default") if parts else None
            if restored is not None and restored.num_rows:
                self._schemas.schemas.setdefault(side, restored.schema)
                self._restored(side, self.local_state_file(restored, side, "restored.parquet"))
        logger.info(
            "%s: restored %s rows of state (key groups %d-%d), watermark %d",
            self.environment.task_name,
            [sum(t.num_rows for t in parts) for parts in tables.values()],
            self.key_groups.start,
            self.key_groups.end,
            self.fired,
        )


def joined_columns(
    left: list[str],
    right: list[str],
    left_keys: tuple[str, ...],
    right_keys: tuple[str, ...],
    suffix: str,
) -> list[tuple[str, str, str]]:
    """The columns of a joined row as ``(side, column, output name)``, side ``l`` or ``r``.

    The first input's columns, then the second's; internal columns (``__ws``, ``__kg``) are
    left out, and so is a key of the second input named as the first input's key at the same
    position (the two are equal). Any other column of the second input whose name is taken
    gets ``suffix`` (again, until the name is free).
    """
    out = [("l", c, c) for c in left if c not in _INTERNAL]
    taken = {c for _, _, c in out}
    same_keys = {b for a, b in zip(left_keys, right_keys, strict=True) if a == b}
    for c in right:
        if c in _INTERNAL or c in same_keys:
            continue
        name = c
        while name in taken:
            name += suffix
        taken.add(name)
        out.append(("r", c, name))
    return out
