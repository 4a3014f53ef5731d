"""ResultPartition: a producer subtask's output, held by its TaskExecutor (Flink's names).

One event log per subpartition (one per consumer subtask). The producing task appends through
the TaskExecutor's mailbox; consumers pull with a long poll (``poll``) that completes as soon as
events at or after ``from_index`` exist, or empty after the poll timeout. Events are small
descriptors; records stay in the exchange store.
"""

from __future__ import annotations

from concurrent.futures import Future

from millrace.errors import PartitionNotFoundError
from millrace.runtime.io.partition_events import (
    DataBundle,
    EndOfPartition,
    PartitionEvent,
    PartitionEvents,
)
from millrace.types import JobId, ResultPartitionId

__all__ = ["ResultPartition"]


class ResultPartition:
    """The event logs of one result partition.

    Args:
        partition_id: Id (the producer's attempt id).
        job_id: Owning job (partitions are released per job).
        num_subpartitions: Consumer subtasks (>= 1).

    Threading:
        Owning TaskExecutor's main thread only; no locks.
    """

    def __init__(self, partition_id: ResultPartitionId, job_id: JobId, num_subpartitions: int):
        if num_subpartitions < 1:
            raise ValueError(f"a partition needs >= 1 subpartition, got {num_subpartitions}")
        self.partition_id = partition_id
        self.job_id = job_id
        self._logs: list[list[PartitionEvent]] = [[] for _ in range(num_subpartitions)]
        self._waiting: list[list[tuple[int, Future[PartitionEvents]]]] = [
            [] for _ in range(num_subpartitions)
        ]
        self.has_data = False
        self.num_events = 0
        self.finished = False

    @property
    def num_subpartitions(self) -> int:
        return len(self._logs)

    def add(self, subpartition: int, event: PartitionEvent) -> None:
        """Append ``event`` to one subpartition and wake its waiting pulls.

        Raises:
            IndexError: If ``subpartition`` is out of range.
            RuntimeError: If the partition already ended.
        """
        if self.finished:
            raise RuntimeError(f"partition {self.partition_id} already ended")
        self._logs[subpartition].append(event)
        self.num_events += 1
        if isinstance(event, DataBundle):
            self.has_data = True
        self._wake(subpartition)

    def broadcast(self, event: PartitionEvent) -> None:
        """Append ``event`` to every subpartition (watermarks, end of partition)."""
        for i in range(len(self._logs)):
            self.add(i, event)
        if isinstance(event, EndOfPartition):
            self.finished = True

    def poll(self, subpartition: int, from_index: int) -> Future[PartitionEvents]:
        """Events of ``subpartition`` from ``from_index`` on; parks the pull if none yet.

        Args:
            subpartition: 0 to ``num_subpartitions`` - 1.
            from_index: Index of the first event wanted, >= 0.

        Returns:
            Future completed with the events from ``from_index`` on, at once if there are
            some, else when some arrive (or by ``expire``, or failed by ``release``).

        Raises:
            PartitionNotFoundError: If the partition has no ``subpartition`` or
                ``from_index`` is negative (a consumer's request: it goes back to it).
        """
        if not 0 <= subpartition < len(self._logs):
            raise PartitionNotFoundError(
                self.partition_id, f"no subpartition {subpartition}; it has {len(self._logs)}"
            )
        if from_index < 0:
            raise PartitionNotFoundError(self.partition_id, f"no event {from_index} (from 0 on)")
        future: Future[PartitionEvents] = Future()
        log = self._logs[subpartition]
        if from_index < len(log):
            future.set_result(PartitionEvents(from_index, tuple(log[from_index:])))
        else:
            self._waiting[subpartition].append((from_index, future))
        return future

    def expire(self, future: Future[PartitionEvents], from_index: int) -> None:
        """Complete a parked pull with no events (its poll timeout passed)."""
        for waiting in self._waiting:
            for entry in waiting:
                if entry[1] is future:
                    waiting.remove(entry)
                    break
        if not future.done():
            future.set_result(PartitionEvents(from_index, ()))

    def release(self, reason: str) -> None:
        """Drop the logs; every parked pull fails with PartitionNotFoundError(``reason``)."""
        for waiting in self._waiting:
            for _, future in waiting:
                if not future.done():
                    future.set_exception(PartitionNotFoundError(self.partition_id, reason))
            waiting.clear()
        self._logs = [[] for _ in self._logs]

    def _wake(self, subpartition: int) -> None:
        waiting = self._waiting[subpartition]
        if not waiting:
            return
        log = self._logs[subpartition]
        self._waiting[subpartition] = []
        for from_index, future in waiting:
            if not future.done():
                future.set_result(PartitionEvents(from_index, tuple(log[from_index:])))
