"""Common ground of the data-plane tasks: the chain's parts, the Spark job group, the sinks.

Every Spark job of a task runs in the job group named by the attempt id, on the task's thread
(PySpark pins Python threads to JVM threads), so cancelling the task cancels its Spark jobs.
Sinks stage what they write; at the next barrier the sinks make what was staged since the last
one durable and the task lists it in its acknowledgement (the pre-commit of two-phase commit,
``millrace.api.connector.sink``). A pre-commit that fails declines the checkpoint and keeps
the data staged for the next one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import astuple
from functools import cached_property
from typing import Any

from millrace.api.operators import SinkOperator, TransformOperator
from millrace.config import ExecutionOptions, RpcOptions
from millrace.errors import CheckpointDeclinedError, PipelineError, TaskCancelledError
from millrace.runtime.checkpoint.key_groups import KeyGroupRange, key_group_range
from millrace.runtime.checkpoint.task_state_snapshot import KeyedStateHandle, TaskStateSnapshot
from millrace.runtime.io import exchange_store
from millrace.runtime.io.partition_events import CheckpointBarrier
from millrace.runtime.taskexecutor.task_environment import AbstractInvokable, TaskEnvironment
from millrace.spark.spark_session import is_spark_connect

__all__ = ["SparkStreamTask"]

logger = logging.getLogger(__name__)

_METRICS_INTERVAL = 1.0  # seconds between two progress reports of a running task


class SparkStreamTask(AbstractInvokable):
    """Base of SourceStreamTask and WindowStreamTask.

    Threading:
        ``invoke`` on the task thread; ``cancel`` from the TaskExecutor.
    """

    def __init__(self, environment: TaskEnvironment) -> None:
        super().__init__(environment)
        self.tdd = environment.tdd
        self._spark: Any = None
        _ = self.spark  # the chain's Spark columns load into this process's SparkContext
        self.operators = tuple(op.deserialize() for op in environment.tdd.operators)
        self.transforms = [op for op in self.operators if isinstance(op, TransformOperator)]
        self.sinks = [
            (i, op)
            for i, op in enumerate(self.operators)
            if isinstance(op, SinkOperator) and op.side_output is None
        ]
        self.side_outputs: dict[str, tuple[int, Any]] = {
            op.side_output: (i, op.sink)
            for i, op in enumerate(self.operators)
            if isinstance(op, SinkOperator) and op.side_output is not None
        }
        self._staged: dict[int, list[str]] = {i: [] for i, _ in self.sinks}
        self._staging_sinks: dict[int, Any] = {i: op.sink for i, op in self.sinks}
        self.ask_timeout = environment.configuration.get(RpcOptions.ASK_TIMEOUT)
        self._clock_interval = environment.configuration.get(ExecutionOptions.CLOCK_REPORT_INTERVAL)
        self._clock_reported: tuple[int, float] | None = None  # (watermark, when)
        self._metrics_reported: tuple[tuple[int, ...], float] | None = None  # (counters, when)

    @property
    def spark(self) -> Any:
        """The SparkSession, with this thread's job group and FAIR pool set on first use (a
        Spark Connect session: this thread's operations tagged with the attempt id instead)."""
        if self._spark is None:
            self._spark = self.environment.spark
            if is_spark_connect(self._spark):
                self._spark.addTag(self.tdd.attempt_id)  # thread-local, like the job group
                return self._spark
            context = self._spark.sparkContext
            context.setJobGroup(self.tdd.attempt_id, self.tdd.task_name, interruptOnCancel=True)
            # One FAIR pool per slot: tasks sharing a slot share its share of the cores.
            context.setLocalProperty("spark.scheduler.pool", f"slot-{self.tdd.allocation_id}")
        return self._spark

    def collect(self, frame: Any) -> Any:
        """Run one Spark job: ``frame``'s result as a ``pyarrow.Table``.

        Cancellation is checked before and after, so a task cancelled between Spark jobs
        does not start another (cancelJobGroup only reaches jobs already running).

        Raises:
            TaskCancelledError: If the task was cancelled.
            PipelineError: If the Spark job failed (Spark's error is the cause).
        """
        environment = self.environment
        environment.check_cancelled()
        try:
            table = frame.toArrow()
        except Exception as error:
            environment.check_cancelled()  # a cancelled job fails: report the cancellation
            raise PipelineError(
                f"Spark job failed: {_first_line(error)}", self.tdd.task_name
            ) from error
        environment.check_cancelled()
        return table

    def write_sinks(self, table: Any, sequence: int) -> int:
        """Stage ``table`` (``pyarrow.Table``) in every sink of the chain; returns its rows.

        Raises:
            Exception: Whatever a sink raises (the task fails).
        """
        for index, op in self.sinks:
            self.stage(index, op.sink, table, sequence)
        return table.num_rows

    def stage(self, position: int, sink: Any, table: Any, sequence: int) -> None:
        """Stage ``table`` in ``sink`` (chain position ``position``) for the next checkpoint.

        Raises:
            Exception: Whatever the sink raises (the task fails).
        """
        written = sink.write(
            table, self.tdd.job_id, self.tdd.subtask_index, sequence, self.tdd.attempt_id
        )
        self._staging_sinks[position] = sink
        if written.pending is not None:
            self._staged.setdefault(position, []).append(written.pending)

    def _take_staged(self) -> dict[int, tuple[str, ...]]:
        """The sink data staged since the last call, taken off the task's list."""
        staged = {i: tuple(handles) for i, handles in self._staged.items() if handles}
        self._staged = {i: [] for i in self._staged}
        return staged

    def pre_commit(self, checkpoint_id: int) -> dict[int, tuple[str, ...]]:
        """At a barrier: the sink data staged since the last barrier, made durable by each
        sink's ``pre_commit``, for the acknowledgement (chain position -> handles).

        Raises:
            CheckpointDeclinedError: If a sink's pre-commit failed; everything taken stays
                staged, for the next checkpoint.
        """
        staged = self._take_staged()
        for position, handles in staged.items():
            sink = self._staging_sinks[position]
            pre_commit = getattr(sink, "pre_commit", None)
            if pre_commit is None:
                continue
            try:
                pre_commit(self.tdd.job_id, checkpoint_id, handles)
            except Exception as error:
                for kept, kept_handles in staged.items():  # first in line for the next one
                    self._staged[kept] = [*kept_handles, *self._staged.get(kept, [])]
                raise CheckpointDeclinedError(
                    checkpoint_id,
                    f"pre-commit of {sink.describe()} failed: {type(error).__name__}: {error}",
                ) from error
        return staged

    def keyed_chain(self, kind: type, what: str) -> tuple[Any, Any]:
        """The first operator of a keyed chain (checked to be a ``kind``) and the input gate.

        Raises:
            PipelineError: If the chain starts with another operator, ends in no sink, or the
                task has no input gate (``what`` names the chain in the message).
        """
        env = self.environment
        op = self.operators[0]
        if not isinstance(op, kind):
            raise PipelineError(f"{what} must start with a {kind.__name__}", env.task_name)
        if not self.sinks:
            raise PipelineError(f"{what} must end in a sink", env.task_name)
        if env.input_gate is None:
            raise PipelineError(f"{what} needs an input gate", env.task_name)
        return op, env.input_gate

    @cached_property
    def key_groups(self) -> KeyGroupRange:
        """The key groups this subtask owns (Flink's computeKeyGroupRangeForOperatorIndex)."""
        tdd = self.tdd
        return key_group_range(tdd.max_parallelism, tdd.parallelism, tdd.subtask_index)

    @cached_property
    def state_dir(self) -> str:
        """Directory (path or URL) of this attempt's keyed state files in the exchange store."""
        return exchange_store.join(
            self.environment.working_dir, "state", self.tdd.vertex_id, self.tdd.attempt_id
        )

    def acknowledge_keyed(
        self,
        barrier: CheckpointBarrier,
        keyed_state: Callable[[], tuple[KeyedStateHandle, ...]],
        watermark_ms: int,
    ) -> None:
        """A keyed task's part of a checkpoint, once its barrier is aligned: snapshot the
        keyed state (``keyed_state()`` writes it), pre-commit the sinks, pass the barrier on,
        acknowledge. If the state or a pre-commit cannot be written, decline the checkpoint
        and run on (the barrier still goes out, so the tasks downstream stay aligned).

        Raises:
            TaskCancelledError: If the task was cancelled meanwhile.
        """
        env = self.environment
        started = time.perf_counter()
        try:
            handles = keyed_state()
            sink_pending = self.pre_commit(barrier.checkpoint_id)
        except TaskCancelledError:
            raise
        except Exception as error:
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
            keyed_state=handles, sink_pending=sink_pending, watermark_ms=watermark_ms
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

    def poll_input(self, gate: Any, timeout: float) -> list[Any]:
        """``gate.poll_next(timeout)``, the wait timed as idle (waiting for input), and the
        gate's watermark kept as the task's ``currentInputWatermark``."""
        metrics = self.environment.io_metrics
        with metrics.idle():
            events: list[Any] = gate.poll_next(timeout)
        metrics.current_input_watermark_ms = gate.watermark
        return events

    def report_clock(self, watermark_ms: int, *, force: bool = False) -> None:
        """Report this task's min clock to the JobMaster's clock service (seed 001) when it
        changed, at most every ``execution.clock.report-interval`` unless ``force``."""
        now = time.monotonic()
        last = self._clock_reported
        if last is not None and (
            last[0] == watermark_ms or (not force and now - last[1] < self._clock_interval)
        ):
            return
        self._clock_reported = (watermark_ms, now)
        self.environment.checkpoint_responder.report_watermark(watermark_ms)

    def report_progress(self) -> None:
        """Send the task's counters to the JobMaster when they changed, at most once a second
        (a running task's busy or idle time always moves, so that is about once a second).

        Called on every turn of the task's loop, idle turns included, so the counts of a last
        bundle reach the JobMaster within a second even when no bundle follows.
        """
        now = time.monotonic()
        last = self._metrics_reported
        if last is not None and now - last[1] < _METRICS_INTERVAL:
            return
        self.environment.io_metrics.sync()  # busy/idle time and the rates move on
        counters = astuple(self.environment.metrics)
        if last is not None and last[0] == counters:
            return
        self._metrics_reported = (counters, now)
        self.environment.report_metrics()

    def apply_transforms(self, frame: Any, transforms: list[TransformOperator]) -> Any:
        """Apply the chained ``transform`` functions to ``frame`` (lazily).

        Raises:
            PipelineError: If a function raises or does not return a DataFrame.
        """
        from pyspark.sql import DataFrame

        for op in transforms:
            try:
                result = op.fn(frame)
            except Exception as error:
                raise PipelineError(
                    f"transform {op.name!r} raised {type(error).__name__}: {error}",
                    self.tdd.task_name,
                ) from error
            if not isinstance(result, DataFrame):
                raise PipelineError(
                    f"transform {op.name!r} must return a pyspark DataFrame, "
                    f"got {type(result).__name__}",
                    self.tdd.task_name,
                )
            frame = result
        return frame


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return (text[0] if text else type(error).__name__)[:500]
