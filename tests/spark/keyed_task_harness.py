"""A keyed data-plane task (running aggregate, interval join) run on its own thread in the test
session's SparkSession, fed by scripted producers through a real ``InputGate``.

The test plays the producers: it appends exchange files, watermarks and checkpoint barriers to
the channels (``KeyedTaskRun.bundle``, ``checkpoint``, ``end``) and waits for the task's
answers: the acknowledgements (with their ``TaskStateSnapshot``), the clock it reports and the
tables it writes to its sink (``FileSink``: one Parquet file per write). A checkpoint puts a
watermark and a barrier on every channel and waits for the acknowledgement and for the clock
report of that watermark, which the task makes only after the turn of its loop that took the
barrier ended (its state expired and compacted): the next step starts from a settled task.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from millrace.config import Configuration
from millrace.runtime.checkpoint.task_state_snapshot import TaskStateSnapshot
from millrace.runtime.deployment import InputChannelDescriptor, TaskDeploymentDescriptor
from millrace.runtime.io.input_gate import InputGate
from millrace.runtime.io.partition_events import (
    CheckpointBarrier,
    DataBundle,
    EndOfPartition,
    PartitionEvent,
    PartitionEvents,
    Watermark,
)
from millrace.runtime.jobgraph import OperatorKind, SerializedOperator
from millrace.runtime.sink.sink import SinkWrite
from millrace.runtime.taskexecutor.task_environment import TaskEnvironment
from millrace.types import (
    Address,
    AllocationId,
    ExecutionAttemptId,
    JobId,
    JobVertexId,
    ResultPartitionId,
)
from tests.waiting import result_within, wait_until

__all__ = [
    "FileSink",
    "KeyedTaskRun",
    "key_groups",
    "keys_in_every_key_group",
    "pending_tables",
    "read_tables",
    "snapshot_rows",
]

WAIT = 120.0


class FileSink:
    """Writes every table it is given as one Parquet file (name: attempt, subtask, sequence)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def describe(self) -> str:
        return f"files at {self.directory}"

    def write(
        self, table: Any, job_id: str, subtask: int, sequence: int, attempt_id: str
    ) -> SinkWrite:
        import pyarrow.parquet as pq

        path = os.path.join(self.directory, f"{attempt_id}-{subtask:03d}-{sequence:06d}.parquet")
        pq.write_table(table, path + ".part")
        os.replace(path + ".part", path)  # whole when the test sees it
        return SinkWrite(table.num_rows, path)


def read_tables(paths: Sequence[str]) -> list[Any]:
    import pyarrow.parquet as pq

    return [pq.read_table(p) for p in paths]


def key_groups(spark: Any, keys: Sequence[Any], max_parallelism: int) -> dict[Any, int]:
    """Spark's murmur3 ``hash`` of each string key mod ``max_parallelism`` (Flink's key
    group, as the producers compute it)."""
    from pyspark.sql import functions as F

    frame = spark.createDataFrame([(k,) for k in keys], "k string")
    got = frame.select("k", F.pmod(F.hash("k"), F.lit(max_parallelism)).alias("g")).collect()
    return {row.k: row.g for row in got}


def keys_in_every_key_group(spark: Any, max_parallelism: int, per_group: int = 2) -> list[str]:
    """``per_group`` keys of every key group (``key-<n>``, the first ones found)."""
    groups = key_groups(spark, [f"key-{n}" for n in range(40 * max_parallelism)], max_parallelism)
    chosen: dict[int, list[str]] = {}
    for k, g in groups.items():
        if len(chosen.setdefault(g, [])) < per_group:
            chosen[g].append(k)
    assert sorted(chosen) == list(range(max_parallelism)), "no key of some key group"
    return sorted(k for ks in chosen.values() for k in ks)


def pending_tables(snapshot: TaskStateSnapshot) -> list[Any]:
    """The tables a checkpoint's acknowledgement lists as written to the sink since the last
    barrier."""
    return read_tables([h for handles in snapshot.sink_pending.values() for h in handles])


def snapshot_rows(snapshot: TaskStateSnapshot) -> list[Any]:
    """The keyed state files of ``snapshot`` as ``pyarrow.Table``s (schema metadata kept)."""
    import pyarrow.parquet as pq

    return [pq.read_table(h.path) for h in snapshot.keyed_state]


class _ScriptedChannels:
    """The producers' ends of the channels: an event log per channel; a pull is answered with
    what its log holds from the asked index, at once or when the test appends to it."""

    def __init__(self, channels: Sequence[InputChannelDescriptor]) -> None:
        self._index = {c: i for i, c in enumerate(channels)}
        self._logs: list[list[PartitionEvent]] = [[] for _ in channels]
        self._waiting: dict[int, tuple[int, Future[PartitionEvents]]] = {}
        self._lock = threading.Lock()

    def poll(self, channel: InputChannelDescriptor, from_index: int) -> Future[PartitionEvents]:
        i = self._index[channel]
        reply: Future[PartitionEvents] = Future()
        with self._lock:
            log = self._logs[i]
            if from_index < len(log):
                reply.set_result(PartitionEvents(from_index, tuple(log[from_index:])))
            else:
                self._waiting[i] = (from_index, reply)
        return reply

    def append(self, channel: int, events: Sequence[PartitionEvent]) -> None:
        with self._lock:
            log = self._logs[channel]
            log.extend(events)
            waiting = self._waiting.pop(channel, None)
            if waiting is not None:
                from_index, reply = waiting
                if not reply.cancelled():
                    reply.set_result(PartitionEvents(from_index, tuple(log[from_index:])))


@dataclass
class KeyedTaskRun:
    """One subtask of a keyed chain ``operators -> FileSink`` run by ``invokable``.

    Args:
        invokable: The task class.
        operators: ``(kind, name, operator)`` of the chain before its sink.
        work: A directory of its own (exchange store, checkpoints, sink output).
        inputs: The input index of each channel (one channel per producer subtask).
        subtask_index, parallelism, max_parallelism: Which subtask (its key groups).
        restore: The snapshot to restore from.
        checkpointing: Whether checkpointing is on (``execution.checkpointing.interval``).
        settings: More configuration.
    """

    invokable: type
    operators: Sequence[tuple[OperatorKind, str, object]]
    work: Path
    inputs: Sequence[int] = (0,)
    subtask_index: int = 0
    parallelism: int = 1
    max_parallelism: int = 128
    restore: TaskStateSnapshot | None = None
    checkpointing: bool = True
    settings: dict[str, str] = field(default_factory=dict)
    attempt: str = "run1"

    def __post_init__(self) -> None:
        self.out = self.work / f"out-{self.attempt}-{self.subtask_index}"
        self.out.mkdir(parents=True, exist_ok=True)
        self.channels = tuple(
            InputChannelDescriptor(
                ResultPartitionId(f"producer-{n}"),
                self.subtask_index,
                Address("local://test/producer"),
                n,
                input_index,
            )
            for n, input_index in enumerate(self.inputs)
        )
        import millrace.spark.column_serde  # noqa: F401  (ships Spark columns, as a job graph does)

        chain = [SerializedOperator.of(kind, name, op) for kind, name, op in self.operators]
        chain.append(
            SerializedOperator.of(OperatorKind.SINK, "Sink: files", _sink_op(str(self.out)))
        )
        self.tdd = TaskDeploymentDescriptor(
            JobId("job"),
            "job",
            Address("local://test/jobmaster"),
            JobVertexId("keyed"),
            f"keyed ({self.subtask_index + 1}/{self.parallelism})",
            self.subtask_index,
            self.parallelism,
            ExecutionAttemptId(self.attempt),
            AllocationId("slot-0"),
            f"{self.invokable.__module__}:{self.invokable.__name__}",
            tuple(chain),
            False,
            None,
            0,
            self.channels,
            self.max_parallelism,
            restore=self.restore,
        )
        self.acks: dict[int, TaskStateSnapshot] = {}
        self.declined: dict[int, str] = {}
        self.clock: list[int] = []
        self.ended: Future[None] = Future()
        self._producers = _ScriptedChannels(self.channels)
        self._watermark = 0
        self._sequence = 0

    def start(self, spark: Any) -> KeyedTaskRun:
        session: Future[Any] = Future()
        session.set_result(spark)
        settings = {
            "execution.checkpointing.interval": "1 h" if self.checkpointing else "0 s",
            "state.checkpoints.dir": str(self.work / "checkpoints"),
            "execution.partition-poll-timeout": "50 ms",
            "execution.clock.report-interval": "1 ms",
            **self.settings,
        }
        gate = InputGate(self.channels, self._producers.poll, aligned=True)
        self.env = TaskEnvironment(
            self.tdd,
            Configuration(settings),
            session,
            str(self.work / "exchange"),
            request_split=_no_splits,
            emit=lambda subpartition, event: None,
            input_gate=gate,
            checkpoint_responder=self,
            report_metrics=lambda: None,
        )

        def invoke() -> None:
            try:
                self.task = self.invokable(self.env)
                self.task.invoke()
                self.ended.set_result(None)
            except BaseException as error:
                self.ended.set_exception(error)

        threading.Thread(target=invoke, name=self.tdd.task_name, daemon=True).start()
        return self

    # CheckpointResponder (called on the task thread)
    def acknowledge_checkpoint(self, checkpoint_id: int, snapshot: TaskStateSnapshot) -> None:
        self.acks[checkpoint_id] = snapshot

    def decline_checkpoint(self, checkpoint_id: int, reason: str) -> None:
        self.declined[checkpoint_id] = reason

    def report_watermark(self, watermark_ms: int) -> None:
        self.clock.append(watermark_ms)

    # The producers ----------------------------------------------------------------------------

    def send(self, channel: int, *events: PartitionEvent) -> None:
        self._producers.append(channel, events)

    def bundle(self, channel: int, table: Any, window_size_ms: int | None = None) -> None:
        """Write ``table`` (``pyarrow.Table`` of exchange rows, no ``__target``) as one
        exchange file and send it on ``channel``."""
        from millrace.runtime.io import exchange_store
        from millrace.spark.exchange import window_end_range_ms

        self._sequence += 1
        path = str(self.work / "exchange" / f"bundle-{channel}-{self._sequence:04d}.parquet")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        size = exchange_store.write_parquet(table, path)
        low, high = window_end_range_ms(table, window_size_ms)
        self.send(channel, DataBundle(path, table.num_rows, low, high, size))

    def checkpoint(self, checkpoint_id: int, watermark_ms: int | None = None) -> TaskStateSnapshot:
        """A watermark and barrier ``checkpoint_id`` on every channel; returns the snapshot
        once acknowledged and the loop's turn that took it has ended (the watermark reported).

        ``watermark_ms`` defaults to one more than the last one sent.
        """
        self._watermark = self._watermark + 1 if watermark_ms is None else watermark_ms
        for channel in range(len(self.channels)):
            self.send(channel, Watermark(self._watermark), CheckpointBarrier(checkpoint_id, 0))
        self.wait_turn(lambda: checkpoint_id in self.acks, f"acknowledgement {checkpoint_id}")
        return self.acks[checkpoint_id]

    def wait_turn(self, condition: Callable[[], object], what: str) -> None:
        """Wait for ``condition`` and the task's clock report of the last watermark sent."""
        mark = self._watermark
        wait_until(
            lambda: self._failed() or (condition() and self.reported(mark)),
            what=f"{what} and the watermark {mark} reported",
            timeout=WAIT,
            seen=lambda: (sorted(self.acks), self.clock[-3:]),
        )
        self._failed(raise_it=True)

    def reported(self, watermark_ms: int) -> bool:
        return any(c >= watermark_ms for c in self.clock)

    def end(self) -> None:
        """EndOfPartition on every channel; waits for the task to finish."""
        self.end_inputs()
        result_within(self.ended, WAIT, what=f"{self.tdd.task_name} to finish")

    def end_inputs(self) -> None:
        """EndOfPartition on every channel (a task that should fail ends at once if not)."""
        for channel in range(len(self.channels)):
            self.send(channel, EndOfPartition())

    def _failed(self, raise_it: bool = False) -> bool:
        error = self.ended.exception(timeout=0) if self.ended.done() else None
        if error is not None and raise_it:
            raise error
        return error is not None

    def stop(self) -> None:
        """Cancel the task if it still runs (teardown)."""
        self.env.cancel()
        self._producers.append(0, ())  # wake a pending pull

    # The sink's output ------------------------------------------------------------------------

    def outputs(self) -> list[Any]:
        """Every table the sink was given, in the order of the writes."""
        return read_tables(sorted(str(p) for p in self.out.glob("*.parquet")))


def _sink_op(directory: str) -> Any:
    from millrace.api.operators import SinkOperator

    return SinkOperator(FileSink(directory), "Sink: files")


def _no_splits() -> Future[Any]:
    raise AssertionError("a keyed task asks for no input split")
