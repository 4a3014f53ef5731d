"""Run a keyed window task (``WindowStreamTask``, the chained ``WindowChainStreamTask``) or a
source task in this process, on the test session's SparkSession, without a cluster: a real
``TaskEnvironment`` with a scripted input gate (or a scripted source), a sink that stages each
fired table as a Parquet file, and a checkpoint responder that keeps what it is told.

The task runs on a thread of its own, as a TaskExecutor runs it (Spark's job group and pool
are thread properties: the test thread keeps none), and the test waits for it with a deadline.
Also the plain-Python answers the tests compare with: windows of records by definition.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections import Counter, defaultdict
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import millrace.spark.column_serde  # noqa: F401  (ships the operators' Spark columns, as a client does)
from millrace.config import Configuration
from millrace.runtime.checkpoint.task_state_snapshot import TaskStateSnapshot
from millrace.runtime.deployment import InputChannelDescriptor, TaskDeploymentDescriptor
from millrace.runtime.io.input_split import NextInputSplit
from millrace.runtime.io.partition_events import MIN_WATERMARK
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
from tests.waiting import result_within

MAX_PARALLELISM = 128
US = 1000  # microseconds per millisecond
RUN_WITHIN = 240.0  # seconds: a loaded 2-core machine runs a few Spark jobs in far less


@dataclass(frozen=True)
class DirectorySink:
    """Stages each table as ``<attempt>-<subtask>-<sequence>.parquet`` under ``directory``;
    the pending handle is the file's path."""

    directory: str

    def describe(self) -> str:
        return f"test files at {self.directory}"

    def write(
        self, table: Any, job_id: str, subtask: int, sequence: int, attempt_id: str
    ) -> SinkWrite:
        import pyarrow.parquet as pq

        os.makedirs(self.directory, exist_ok=True)
        path = os.path.join(self.directory, f"{attempt_id}-{subtask:03d}-{sequence:06d}.parquet")
        pq.write_table(table, path)
        return SinkWrite(table.num_rows, path)


def written(paths: list[str]) -> Counter:
    """The rows of sink files as a multiset of tuples (timestamps as epoch microseconds)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    import pyarrow.types as pt

    rows: Counter = Counter()
    for path in paths:
        table = pq.read_table(path)
        columns = [
            pc.cast(c, "int64").to_pylist() if pt.is_timestamp(c.type) else c.to_pylist()
            for c in table.columns
        ]
        rows += Counter(zip(*columns, strict=True))
    return rows


class ScriptedGate:
    """An input gate playing ``steps``: each step is ``(events, watermark)``; a poll hands the
    next step's events (on channel 0) and moves the gate's watermark, the poll after it hands
    nothing (the task then fires what is due), and when the steps are played the gate is
    finished. Before each step it notes the sink files written so far."""

    def __init__(self, steps: list[tuple[list[Any], int]], out: Path) -> None:
        self._steps = list(steps)
        self._out = out
        self._between = False
        self.watermark = MIN_WATERMARK
        self.finished = False
        self.files_before_step: list[list[str]] = []

    def poll_next(self, timeout: float) -> list[tuple[int, Any]]:
        if self._between or self.finished:
            self._between = False
            return []
        self.files_before_step.append(sink_files(self._out))
        if not self._steps:
            self.finished = True
            return []
        events, self.watermark = self._steps.pop(0)
        self._between = True
        return [(0, e) for e in events]

    def close(self) -> None:
        pass

    def outputs_per_step(self) -> list[list[str]]:
        """The sink files written after each step (while its watermark held), and last those
        written once the gate finished (the end of input)."""
        marks = [*self.files_before_step, sink_files(self._out)]
        return [sorted(set(b) - set(a)) for a, b in itertools.pairwise(marks)]


def sink_files(out: Path) -> list[str]:
    return sorted(str(p) for p in out.glob("*.parquet")) if out.exists() else []


@dataclass
class Responder:
    """CheckpointResponder: keeps acknowledgements; a decline fails the test."""

    acks: list[tuple[int, TaskStateSnapshot]] = field(default_factory=list)
    declines: list[tuple[int, str]] = field(default_factory=list)

    def acknowledge_checkpoint(self, checkpoint_id: int, snapshot: TaskStateSnapshot) -> None:
        self.acks.append((checkpoint_id, snapshot))

    def decline_checkpoint(self, checkpoint_id: int, reason: str) -> None:
        self.declines.append((checkpoint_id, reason))

    def report_watermark(self, watermark_ms: int) -> None:
        pass


@dataclass
class TaskRun:
    """One task attempt's environment and what it said."""

    env: TaskEnvironment
    responder: Responder
    out: Path
    events: list[Any]

    def outputs(self) -> list[str]:
        return sink_files(self.out)


def deployment(
    invokable: str,
    operators: list[tuple[OperatorKind, str, Any]],
    *,
    attempt: str,
    subtask: int = 0,
    parallelism: int = 1,
    is_source: bool = False,
    output: bool = False,
    restore: TaskStateSnapshot | None = None,
) -> TaskDeploymentDescriptor:
    channels = (
        ()
        if is_source
        else (
            InputChannelDescriptor(ResultPartitionId("producer"), subtask, Address("local://p"), 0),
        )
    )
    return TaskDeploymentDescriptor(
        JobId("job-1"),
        "job",
        Address("local://test/jobmaster"),
        JobVertexId("window" if not is_source else "source"),
        f"{invokable.rsplit(':', 1)[-1]} ({subtask + 1}/{parallelism})",
        subtask,
        parallelism,
        ExecutionAttemptId(attempt),
        AllocationId("slot-0"),
        invokable,
        tuple(SerializedOperator.of(kind, name, op) for kind, name, op in operators),
        is_source,
        ResultPartitionId(attempt) if output else None,
        1 if output else 0,
        channels,
        MAX_PARALLELISM,
        restore=restore,
    )


def run_task(
    spark: Any,
    work: Path,
    tdd: TaskDeploymentDescriptor,
    task_class: type,
    *,
    gate: Any = None,
    splits: list[NextInputSplit] | None = None,
    configuration: dict[str, Any] | None = None,
    on_split_request: Any = None,
) -> TaskRun:
    """Construct ``task_class`` on its own thread and run ``invoke`` to its end."""
    session: Future[Any] = Future()
    session.set_result(spark)
    responder = Responder()
    events: list[Any] = []
    replies = list(splits or [])
    run: TaskRun

    def next_split() -> Future[NextInputSplit]:
        if on_split_request is not None:
            on_split_request(run)
        reply: Future[NextInputSplit] = Future()
        from millrace.runtime.io.partition_events import MAX_WATERMARK

        reply.set_result(replies.pop(0) if replies else NextInputSplit(None, MAX_WATERMARK))
        return reply

    conf = {
        "state.checkpoints.dir": str(work / "checkpoints"),
        "execution.partition-poll-timeout": "10 ms",
        "execution.bundle.max-delay": "10 ms",
        **(configuration or {}),
    }
    env = TaskEnvironment(
        tdd,
        Configuration(conf),
        session,
        str(work / "task"),
        request_split=next_split,
        emit=lambda subpartition, event: events.append(event),
        input_gate=gate,
        checkpoint_responder=responder,
    )
    run = TaskRun(env, responder, work / "out", events)
    ended: Future[None] = Future()

    def invoke() -> None:
        try:
            task_class(env).invoke()
            ended.set_result(None)
        except BaseException as error:
            ended.set_exception(error)

    threading.Thread(target=invoke, name=f"task {tdd.attempt_id}", daemon=True).start()
    try:
        result_within(ended, RUN_WITHIN, what=f"{tdd.task_name} to finish")
    finally:
        env.cancel()
    return run


# Plain-Python answers ---------------------------------------------------------------------------


def tumbling_start(t_ms: int, size_ms: int, offset_ms: int = 0) -> int:
    """Flink's TimeWindow.getWindowStartWithOffset."""
    return t_ms - (t_ms - offset_ms) % size_ms


def window_result(carrier: str, start_ms: int, end_ms: int, records: list[tuple]) -> tuple:
    """``(carrier, window_start us, window_end us, flights, seats, worst)`` of a window's
    records ``(carrier, t_ms, seats, delay)`` (SQL: sum and max skip nulls)."""
    seats = [r[2] for r in records if r[2] is not None]
    delays = [r[3] for r in records if r[3] is not None]
    return (
        carrier,
        start_ms * US,
        end_ms * US,
        len(records),
        sum(seats) if seats else None,
        max(delays) if delays else None,
    )


def tumbling_windows(records: list[tuple], size_ms: int) -> dict[tuple, list[tuple]]:
    """Records ``(carrier, t_ms, ...)`` per (carrier, start, end)."""
    windows: dict[tuple, list[tuple]] = defaultdict(list)
    for r in records:
        start = tumbling_start(r[1], size_ms)
        windows[(r[0], start, start + size_ms)].append(r)
    return windows


def session_windows(records: list[tuple], gap_ms: int) -> dict[tuple, list[tuple]]:
    """Records per (carrier, session start, session end): each record's window is
    ``[t, t + gap)``; a key's windows that overlap or touch merge (Flink's MergingWindowSet)."""
    by_key: dict[str, list[tuple]] = defaultdict(list)
    for r in records:
        by_key[r[0]].append(r)
    sessions: dict[tuple, list[tuple]] = {}
    for carrier, own in by_key.items():
        own.sort(key=lambda r: r[1])
        current: list[tuple] = []
        start = end = 0
        for r in own:
            if current and r[1] <= end:
                current.append(r)
                end = max(end, r[1] + gap_ms)
                continue
            if current:
                sessions[(carrier, start, end)] = current
            current, start, end = [r], r[1], r[1] + gap_ms
        if current:
            sessions[(carrier, start, end)] = current
    return sessions


def fired_between(windows: dict[tuple, list[tuple]], after: int, upto: int) -> Counter:
    """Results of the windows whose end - 1 lies in ``(after, upto]``."""
    return Counter(
        window_result(c, s, e, rs) for (c, s, e), rs in windows.items() if after < e - 1 <= upto
    )
