"""What a running task sees of the runtime (Flink's ``Environment``) and the invokable contract.

The data plane (``millrace.spark``) implements ``AbstractInvokable``; it reads splits or its
input gate, emits partition events and counts records through the ``TaskEnvironment``, and
never touches endpoints directly.
"""

from __future__ import annotations

import concurrent.futures
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Protocol

from millrace.config import Configuration
from millrace.errors import TaskCancelledError
from millrace.runtime.checkpoint.task_state_snapshot import TaskStateSnapshot
from millrace.runtime.deployment import TaskDeploymentDescriptor
from millrace.runtime.executiongraph import IOMetrics
from millrace.runtime.io.input_gate import InputGate
from millrace.runtime.io.input_split import NextInputSplit
from millrace.runtime.io.partition_events import PartitionEvent, Watermark
from millrace.runtime.jobgraph import OperatorKind
from millrace.runtime.metrics.task_io_metric_group import TaskIOMetricGroup

if TYPE_CHECKING:
    from millrace.runtime.taskexecutor.partition_flow_control import OutputRoom

__all__ = ["AbstractInvokable", "CheckpointResponder", "TaskEnvironment"]

_SPARK_WAIT_STEP = 0.2  # seconds between cancellation checks while Spark starts
_ACK_REQUEST_REPEAT = 2.0  # seconds a producer waits for room before it repeats its AckRequests


class CheckpointResponder(Protocol):
    """How a task answers the CheckpointCoordinator and the clock service (Flink's
    CheckpointResponder). Threading: any thread; the calls are tells to the JobMaster."""

    def acknowledge_checkpoint(self, checkpoint_id: int, snapshot: TaskStateSnapshot) -> None: ...

    def decline_checkpoint(self, checkpoint_id: int, reason: str) -> None: ...

    def report_watermark(self, watermark_ms: int) -> None: ...


class TaskEnvironment:
    """The runtime services of one task.

    Args:
        tdd: The deployment descriptor.
        configuration: Job configuration.
        spark: The TaskManager's SparkSession, once started.
        working_dir: The job's directory in the exchange store (a path or fsspec URL,
            :mod:`~millrace.runtime.io.exchange_store`).
        request_split: Blocking call returning the next input split (sources).
        emit: ``emit(subpartition | None, event)`` appends to the output partition; None
            broadcasts to every subpartition.
        input_gate: The consumer's input gate, or None for sources.
        checkpoint_responder: Acknowledges checkpoints and reports watermarks to the
            JobMaster.
        report_metrics: Sends the task's counters to the JobMaster (a RUNNING update).
        output_room: Room in the output channels (seed 001's flow control), or None when
            the task never waits (no output partition, or flow control off).

    Attributes:
        metrics: The task's counters (IOMetrics).
        io_metrics: Its time accounting and published metric snapshots
            (:class:`~millrace.runtime.metrics.task_io_metric_group.TaskIOMetricGroup`).

    Threading:
        The task thread, except ``cancel`` and ``trigger_checkpoint`` (any thread).
    """

    def __init__(
        self,
        tdd: TaskDeploymentDescriptor,
        configuration: Configuration,
        spark: Future[Any],
        working_dir: str,
        request_split: Callable[[], Future[NextInputSplit]],
        emit: Callable[[int | None, PartitionEvent], None],
        input_gate: InputGate | None,
        checkpoint_responder: CheckpointResponder,
        report_metrics: Callable[[], None] = lambda: None,
        output_room: OutputRoom | None = None,
    ) -> None:
        self.tdd = tdd
        self.configuration = configuration
        self._spark_provider = spark
        self._spark: Any = None
        self.working_dir = working_dir
        self.metrics = IOMetrics()
        self.io_metrics = TaskIOMetricGroup(
            tdd.job_id,
            tdd.job_name,
            tdd.vertex_id,
            tdd.task_name,
            tdd.subtask_index,
            tdd.attempt_id,
            self.metrics,
            operator_names=[o.name for o in tdd.operators if o.kind != OperatorKind.SIDE_OUTPUT],
        )
        self.input_gate = input_gate
        self._request_split = request_split
        self._emit = emit
        self._cancelled = threading.Event()
        self.checkpoint_responder = checkpoint_responder
        self._report_metrics = report_metrics
        self._output_room = output_room
        self._triggers: queue.SimpleQueue[tuple[int, int]] = queue.SimpleQueue()

    @property
    def spark(self) -> Any:
        """The SparkSession (``pyspark.sql.SparkSession``); the first use may wait for it to
        start, and a cancellation ends that wait.

        Raises:
            TaskCancelledError: If the task is cancelled while Spark starts.
            Exception: What starting Spark raised.
        """
        while self._spark is None:
            self.check_cancelled()
            try:
                self._spark = self._spark_provider.result(timeout=_SPARK_WAIT_STEP)
            except concurrent.futures.TimeoutError:
                continue
        return self._spark

    @property
    def spark_if_started(self) -> Any:
        """The SparkSession if this task already obtained it, else None. Any thread."""
        return self._spark

    @property
    def task_name(self) -> str:
        return self.tdd.task_name

    @property
    def subtask_index(self) -> int:
        return self.tdd.subtask_index

    def next_input_split(self, timeout: float) -> NextInputSplit:
        """Ask the JobMaster for the next split (RequestNextInputSplit); blocks the task.

        Raises:
            RpcTimeoutError: If the JobMaster does not answer within ``timeout`` seconds.
            TaskCancelledError: If the task was cancelled.
        """
        self.check_cancelled()
        with self.io_metrics.idle():  # waiting for splits is waiting for input
            return self._request_split().result(timeout=timeout)

    def emit(self, subpartition: int, event: PartitionEvent) -> None:
        """Append ``event`` to subpartition ``subpartition`` of the output partition."""
        self._emit(subpartition, event)

    def broadcast(self, event: PartitionEvent) -> None:
        """Append ``event`` to every subpartition of the output partition (a watermark is
        kept as the task's ``currentOutputWatermark``)."""
        if isinstance(event, Watermark):
            self.io_metrics.current_output_watermark_ms = event.timestamp_ms
        self._emit(None, event)

    def wait_for_output_room(self, while_waiting: Callable[[], None], step: float = 0.05) -> None:
        """Block until every output channel has room for another bundle (seed 001's flow
        control: a slow consumer slows this producer); the wait is the task's back-pressured
        time. ``while_waiting()`` runs every ``step`` seconds meanwhile (a source takes its
        checkpoint triggers there, so barriers keep flowing).

        Raises:
            TaskCancelledError: If the task is cancelled meanwhile.
            PartitionNotFoundError: If the output partition was released meanwhile.

        Threading:
            The task thread.
        """
        if self._output_room is None or self._result(self._output_room.has_room(), step):
            return  # a quick round trip, counted as busy
        room = self._output_room.wait()
        repeat_at = time.monotonic() + _ACK_REQUEST_REPEAT
        while True:
            with self.io_metrics.back_pressured():  # timed step by step: seen while it lasts
                try:
                    room.result(timeout=step)
                    return
                except concurrent.futures.TimeoutError:
                    pass
            self.check_cancelled()
            while_waiting()
            if time.monotonic() >= repeat_at:  # an Ack lost with a connection: ask again
                self._output_room.request_acks()
                repeat_at = time.monotonic() + _ACK_REQUEST_REPEAT

    def _result(self, future: Future[bool], step: float) -> bool:
        """``future``'s result, checking for cancellation every ``step`` seconds."""
        while True:
            try:
                return future.result(timeout=step)
            except concurrent.futures.TimeoutError:
                self.check_cancelled()

    def report_metrics(self) -> None:
        """Send the counters so far to the JobMaster (progress of a running task), with the
        busy/idle/back-pressured time brought up to date (and a new metrics snapshot)."""
        self.io_metrics.sync()
        self._report_metrics()

    @property
    def restore(self) -> TaskStateSnapshot | None:
        """The state to restore from (a checkpoint or savepoint), or None for a fresh start."""
        return self.tdd.restore

    def trigger_checkpoint(self, checkpoint_id: int, timestamp_ms: int) -> None:
        """TriggerCheckpoint for a source task: taken at its next bundle boundary.

        Threading:
            Any thread.
        """
        self._triggers.put((checkpoint_id, timestamp_ms))

    def take_checkpoint_triggers(self) -> list[tuple[int, int]]:
        """Triggers received since the last call, oldest first: ``(checkpoint_id,
        timestamp_ms)``."""
        taken = []
        while True:
            try:
                taken.append(self._triggers.get_nowait())
            except queue.Empty:
                return taken

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def cancel(self) -> None:
        """Request cancellation. Threading: any thread."""
        self._cancelled.set()

    def check_cancelled(self) -> None:
        """Raises TaskCancelledError if cancellation was requested."""
        if self._cancelled.is_set():
            raise TaskCancelledError(self.task_name)


class AbstractInvokable:
    """A data-plane task: ``invoke`` runs the chain until its input ends.

    Subclasses are named by ``module:Class`` in the JobVertex and constructed with the
    TaskEnvironment on the task thread.
    """

    def __init__(self, environment: TaskEnvironment) -> None:
        self.environment = environment

    def invoke(self) -> None:
        """Run to completion. Raises on failure; TaskCancelledError when cancelled."""
        raise NotImplementedError

    def cancel(self) -> None:
        """Stop as soon as possible (called from the TaskExecutor's thread)."""
        self.environment.cancel()
