"""InputGate: a consumer subtask's view of its input channels (Flink's names).

One channel per producer subtask. The gate keeps one outstanding long poll per unfinished
channel and hands events to the task as they arrive, preserving each channel's order; it tracks
per-channel watermarks (the gate's watermark is their minimum over the channels that are not
idle, seed 002; it never goes back) and aligns checkpoint barriers (Carbone et al. 2015):

* aligned (EXACTLY_ONCE): once barrier ``n`` arrived on a channel, that channel is blocked: its
  later events wait (nothing more is polled from it; what came in the same reply is held back)
  until barrier ``n`` arrived on every channel still open. Then the task gets one
  ``CheckpointBarrier`` (channel ``-1``), snapshots its state, and the channels flow again. No
  record after a barrier is part of that checkpoint's state.
* unaligned (AT_LEAST_ONCE): nothing is blocked; the task gets the barrier when the last
  channel delivered it, so records that overtook it on faster channels are in the snapshot and
  may be processed again after a restore.

A finished channel counts as aligned. A newer barrier abandons an alignment that did not
complete (its checkpoint was aborted).

Seed 001's channel protocol, consumer end: every event's session and sequence number are
checked as it arrives (:class:`~millrace.runtime.io.channel_sequence.ChannelSequence`: a gap, a
repeat or a stale session raises MessageLossError before the event reaches the task). An
``AckRequest`` is not handed to the task: it is answered with an ``Ack`` at the task's next
``poll_next`` (the task has then taken every event before it); ``poll_next`` returns no event
after an AckRequest (the rest waits for the next call), so the Ack goes out as soon as the task
took the events the request covers. An AckRequest held back by an alignment is answered after
the alignment, so a producer whose window fills behind a barrier
waits, and the producers of the channels still to deliver their barrier keep going.
"""

from __future__ import annotations

import concurrent.futures
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future

from millrace.runtime.deployment import InputChannelDescriptor
from millrace.runtime.io.channel_sequence import ChannelSequence, channel_session_id
from millrace.runtime.io.partition_events import (
    MAX_WATERMARK,
    MIN_WATERMARK,
    Ack,
    AckRequest,
    CheckpointBarrier,
    EndOfPartition,
    PartitionEvent,
    PartitionEvents,
    Watermark,
    WatermarkStatus,
)

__all__ = ["BARRIER_CHANNEL", "InputGate"]

PollFn = Callable[[InputChannelDescriptor, int], "Future[PartitionEvents]"]
AckFn = Callable[[InputChannelDescriptor, Ack], None]
"""Sends an Ack to the channel's producer (a tell)."""

BARRIER_CHANNEL = -1
"""Channel number of the aligned CheckpointBarrier the gate hands to its task."""


class InputGate:
    """Reads the channels of one consumer subtask.

    Args:
        channels: The input channels, one per producer subtask.
        poll: Starts a pull ``(channel, from_index) -> Future[PartitionEvents]`` (an ask to the
            producer's TaskExecutor).
        aligned: Align checkpoint barriers (EXACTLY_ONCE) or not (AT_LEAST_ONCE).
        ack: Answers AckRequests (None: they are taken without an answer).

    Threading:
        The task thread only.
    """

    def __init__(
        self,
        channels: Sequence[InputChannelDescriptor],
        poll: PollFn,
        aligned: bool = True,
        ack: AckFn | None = None,
    ) -> None:
        self._channels = list(channels)
        self._poll = poll
        self._aligned = aligned
        self._ack = ack
        self._sequences = [
            ChannelSequence(
                f"producer {c.producer_index} -> consumer {c.subpartition_index} (input "
                f"{c.input_index}, partition {c.partition_id})",
                channel_session_id(c.partition_id),
            )
            for c in channels
        ]
        self._acks_due: list[tuple[int, Ack]] = []
        n = len(channels)
        self._next_index = [0] * n
        self._finished = [False] * n
        self._watermarks = [MIN_WATERMARK] * n
        self._idle = [False] * n
        self._watermark = MIN_WATERMARK
        self._pending: dict[Future[PartitionEvents], int] = {}
        self._held: list[deque[tuple[PartitionEvent, int]]] = [deque() for _ in range(n)]
        self._blocked = [False] * n
        self._barrier: CheckpointBarrier | None = None
        self._arrived: set[int] = set()

    @property
    def finished(self) -> bool:
        """True once every channel delivered EndOfPartition and nothing is held back."""
        return all(self._finished) and not any(self._held)

    @property
    def watermark(self) -> int:
        """Minimum of the last watermarks of the channels that are not idle (epoch ms);
        when every channel is idle, the largest of them (Flink's StatusWatermarkValve: all
        progress made so far is released). Monotonic."""
        return self._watermark

    def _update_watermark(self) -> None:
        active = [w for w, idle in zip(self._watermarks, self._idle, strict=True) if not idle]
        candidate = min(active) if active else max(self._watermarks, default=MIN_WATERMARK)
        self._watermark = max(self._watermark, candidate)

    @property
    def aligning(self) -> int | None:
        """The checkpoint whose barriers are being aligned, if any."""
        return None if self._barrier is None else self._barrier.checkpoint_id

    def poll_next(self, timeout: float) -> list[tuple[int, PartitionEvent]]:
        """Wait up to ``timeout`` seconds for events; return them as ``(channel, event)``.

        Watermarks, barriers and EndOfPartition update the gate's state before they are
        returned; an aligned barrier comes as ``(BARRIER_CHANNEL, CheckpointBarrier)``.

        Raises:
            RpcError: If a producer cannot be reached or its partition is gone.
            MessageLossError: If a channel's events are out of sequence (gap, repeat, stale
                session); the offending event is dropped.
        """
        out: list[tuple[int, PartitionEvent]] = []
        while True:
            self._send_acks()  # the task took every event handed over before
            for channel, held in enumerate(self._held):  # held back by an alignment or an Ack
                while held and not self._blocked[channel] and not self._acks_due:
                    self._accept(channel, *held.popleft(), out)
            if out or not self._acks_due:
                break
        if out:
            return out
        busy = set(self._pending.values())
        for i, finished in enumerate(self._finished):
            if not finished and not self._blocked[i] and not self._held[i] and i not in busy:
                self._pending[self._poll(self._channels[i], self._next_index[i])] = i
        if not self._pending:
            return out
        done, _ = concurrent.futures.wait(
            list(self._pending), timeout=timeout, return_when=concurrent.futures.FIRST_COMPLETED
        )
        for future in done:
            channel = self._pending.pop(future)
            reply: PartitionEvents = future.result()
            if reply.from_index != self._next_index[channel]:
                continue  # stale reply
            self._next_index[channel] += len(reply.events)
            checked = self._sequences[channel]
            stamps = zip(reply.session_ids, reply.sequences, strict=True)
            for event in reply.events:
                sequence = -1
                if reply.sequences:  # empty only from scripted test producers
                    session_id, sequence = next(stamps)
                    checked.check(session_id, sequence)
                self._accept(channel, event, sequence, out)
        if not out:
            self._send_acks()  # an AckRequest came first: nothing to take before it
        return out

    def _send_acks(self) -> None:
        due, self._acks_due = self._acks_due, []
        if self._ack is not None:
            for channel, ack in due:
                self._ack(self._channels[channel], ack)

    def _accept(
        self,
        channel: int,
        event: PartitionEvent,
        sequence: int,
        out: list[tuple[int, PartitionEvent]],
    ) -> None:
        if self._blocked[channel] or self._acks_due:
            # after an AckRequest, the rest waits for the next poll_next: the Ack then goes
            # out as soon as the task took the events before the request, not after the batch
            self._held[channel].append((event, sequence))
            return
        if isinstance(event, AckRequest):
            # every event before it passed the sequence check: sequence + 1 were received
            session_id = self._sequences[channel].session_id
            self._acks_due.append((channel, Ack(session_id, sequence, sequence + 1)))
            return
        if isinstance(event, CheckpointBarrier):
            self._on_barrier(channel, event, out)
            return
        if isinstance(event, Watermark):
            self._watermarks[channel] = max(self._watermarks[channel], event.timestamp_ms)
            self._update_watermark()
        elif isinstance(event, WatermarkStatus):
            self._idle[channel] = not event.active
            self._update_watermark()
            return  # the task needs no word of it
        elif isinstance(event, EndOfPartition):
            self._finished[channel] = True
            self._idle[channel] = False
            self._watermarks[channel] = MAX_WATERMARK
            self._update_watermark()
        out.append((channel, event))
        if isinstance(event, EndOfPartition):
            self._maybe_aligned(out)

    def _on_barrier(
        self, channel: int, barrier: CheckpointBarrier, out: list[tuple[int, PartitionEvent]]
    ) -> None:
        current = self._barrier
        if current is not None and barrier.checkpoint_id < current.checkpoint_id:
            return  # of an abandoned checkpoint
        if current is None or barrier.checkpoint_id > current.checkpoint_id:
            self._release()  # a newer checkpoint: the older alignment is abandoned
            self._barrier = barrier
        self._arrived.add(channel)
        if self._aligned:
            self._blocked[channel] = True
        self._maybe_aligned(out)

    def _maybe_aligned(self, out: list[tuple[int, PartitionEvent]]) -> None:
        if self._barrier is None:
            return
        if all(i in self._arrived or done for i, done in enumerate(self._finished)):
            out.append((BARRIER_CHANNEL, self._barrier))
            self._release()

    def _release(self) -> None:
        self._barrier = None
        self._arrived.clear()
        self._blocked = [False] * len(self._channels)

    def close(self) -> None:
        """Forget outstanding pulls (their replies are ignored)."""
        for future in self._pending:
            future.cancel()
        self._pending.clear()

    def __repr__(self) -> str:
        return f"InputGate(channels={len(self._channels)}, watermark={self.watermark})"
