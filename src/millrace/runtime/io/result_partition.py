"""ResultPartition: a producer subtask's output, held by its TaskExecutor (Flink's names).

One event log per subpartition (one per consumer subtask). The producing task appends through
the TaskExecutor's mailbox; consumers pull with a long poll (``poll``) that completes as soon as
events at or after ``from_index`` exist, or empty after the poll timeout. Events are small
descriptors; records stay in the exchange store.

Each subpartition is a channel with seed 001's protocol: the partition stamps every event with
the channel's session id and sequence number, keeps the channel's flow-control window
(:class:`~millrace.runtime.io.channel_window.ChannelWindow`), puts AckRequests in, takes the
consumers' Acks (``acknowledge``) and tells the producing task when every channel has room
again (``wait_for_room``).
"""

from __future__ import annotations

import logging
from concurrent.futures import Future

from millrace.errors import PartitionNotFoundError
from millrace.runtime.io.channel_fault_injection import ChannelFaultInjector, Stamped
from millrace.runtime.io.channel_sequence import channel_session_id
from millrace.runtime.io.channel_window import ChannelWindow, FlowControlSettings
from millrace.runtime.io.partition_events import (
    Ack,
    AckRequest,
    DataBundle,
    EndOfPartition,
    PartitionEvent,
    PartitionEvents,
)
from millrace.types import JobId, ResultPartitionId

__all__ = ["ResultPartition"]

logger = logging.getLogger(__name__)


class ResultPartition:
    """The event logs of one result partition.

    Args:
        partition_id: Id (the producer's attempt id).
        job_id: Owning job (partitions are released per job).
        num_subpartitions: Consumer subtasks (>= 1).
        flow_control: The channels' window settings (default: the keys' defaults).
        faults: TEST ONLY fault injection, or None.

    Threading:
        Owning TaskExecutor's main thread only; no locks.
    """

    def __init__(
        self,
        partition_id: ResultPartitionId,
        job_id: JobId,
        num_subpartitions: int,
        flow_control: FlowControlSettings | None = None,
        faults: ChannelFaultInjector | None = None,
    ):
        if num_subpartitions < 1:
            raise ValueError(f"a partition needs >= 1 subpartition, got {num_subpartitions}")
        self.partition_id = partition_id
        self.job_id = job_id
        self.session_id = channel_session_id(partition_id)
        settings = flow_control or FlowControlSettings()
        self.windows = [ChannelWindow(settings, self.session_id) for _ in range(num_subpartitions)]
        self._faults = faults
        self._room: list[Future[None]] = []
        self._logs: list[list[PartitionEvent]] = [[] for _ in range(num_subpartitions)]
        self._sessions: list[list[int]] = [[] for _ in range(num_subpartitions)]
        self._sequences: list[list[int]] = [[] for _ in range(num_subpartitions)]
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
        window = self.windows[subpartition]
        self._append(subpartition, event)
        if isinstance(event, DataBundle):
            self.has_data = True
            if window.ack_request_due:
                window.on_ack_request()
                self._append(subpartition, AckRequest())
        self._wake(subpartition)

    def _append(self, subpartition: int, event: PartitionEvent) -> None:
        window = self.windows[subpartition]
        sequence = window.stamp()
        if isinstance(event, DataBundle):
            window.on_bundle(sequence, event.size_bytes)
        stamped: list[Stamped] = [(self.session_id, sequence, event)]
        if self._faults is not None:
            stamped = self._faults.apply(subpartition, stamped[0])
        for session_id, seq, spoiled in stamped:
            self._logs[subpartition].append(spoiled)
            self._sessions[subpartition].append(session_id)
            self._sequences[subpartition].append(seq)
            self.num_events += 1

    @property
    def lost_events(self) -> int:
        """Events the consumers' Acks reported missing, over all channels (each channel's
        most at any Ack: ``ChannelWindow.lost``)."""
        return sum(w.lost for w in self.windows)

    @property
    def has_room(self) -> bool:
        """Whether every channel's window has room for another bundle."""
        return all(w.has_room for w in self.windows)

    def wait_for_room(self) -> Future[None]:
        """A future completed once every channel has room (at once if it has; failed with
        PartitionNotFoundError if the partition is released first)."""
        future: Future[None] = Future()
        if self.has_room:
            future.set_result(None)
        else:
            self._room.append(future)
        return future

    def request_acks(self) -> None:
        """Put a fresh AckRequest into every channel whose window is full (its producer has
        waited for room a while). An Ack is a tell: one lost with a connection would leave a
        full window waiting for an answer to a request already taken; the repeated request is
        answered by the consumer like any other, and an Ack that is not newer is ignored."""
        for subpartition, window in enumerate(self.windows):
            if not window.has_room and not self.finished:
                window.on_ack_request()
                self._append(subpartition, AckRequest())
                self._wake(subpartition)

    def acknowledge(self, subpartition: int, ack: Ack) -> None:
        """A consumer's Ack: free its channel's window up to the AckRequest it answers
        (ignored if stale or out of range); wake the producer if every channel has room."""
        if not 0 <= subpartition < len(self.windows):
            return
        window = self.windows[subpartition]
        lost_before = window.lost
        accepted = window.on_ack(ack)
        if window.lost > lost_before:
            logger.error(
                "partition %s, channel %d: the consumer's Ack of event %d reports %d events "
                "of the session missing (message loss)",
                self.partition_id,
                subpartition,
                ack.sequence,
                window.lost,
            )
        if accepted and self._room and self.has_room:
            waiting, self._room = self._room, []
            for future in waiting:
                if not future.done():
                    future.set_result(None)

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
            future.set_result(self._events(subpartition, from_index))
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
        """Drop the logs; every parked pull and room wait fails with
        PartitionNotFoundError(``reason``)."""
        waiting_room, self._room = self._room, []
        for room in waiting_room:
            if not room.done():
                room.set_exception(PartitionNotFoundError(self.partition_id, reason))
        for waiting in self._waiting:
            for _, future in waiting:
                if not future.done():
                    future.set_exception(PartitionNotFoundError(self.partition_id, reason))
            waiting.clear()
        self._logs = [[] for _ in self._logs]
        self._sessions = [[] for _ in self._logs]
        self._sequences = [[] for _ in self._logs]

    def _events(self, subpartition: int, from_index: int) -> PartitionEvents:
        return PartitionEvents(
            from_index,
            tuple(self._logs[subpartition][from_index:]),
            tuple(self._sessions[subpartition][from_index:]),
            tuple(self._sequences[subpartition][from_index:]),
        )

    def _wake(self, subpartition: int) -> None:
        waiting = self._waiting[subpartition]
        if not waiting:
            return
        self._waiting[subpartition] = []
        for from_index, future in waiting:
            if not future.done():
                future.set_result(self._events(subpartition, from_index))
