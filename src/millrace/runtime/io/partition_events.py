"""Events of a result partition, in the order a consumer must see them.

Data moves by reference: a ``DataBundle`` names an Arrow/Parquet file in the exchange store
(a local directory), never the records. ``Watermark``, ``CheckpointBarrier`` and
``EndOfPartition`` are in-band, so a consumer sees a producer's watermark or barrier only after
every bundle that preceded it (barriers never overtake records: seed 002, Carbone et al. 2015).

Every event of a channel (producer subtask -> consumer subtask) carries the channel's session id
(new for every producer attempt) and a sequence number (0, 1, 2, ... per channel), for seed 001's
message-loss detection; ``AckRequest`` is in-band too, and the consumer answers it with an
``Ack`` (a tell to the producer's TaskExecutor) once it has taken every event before it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "MAX_WATERMARK",
    "MIN_WATERMARK",
    "Ack",
    "AckRequest",
    "CheckpointBarrier",
    "DataBundle",
    "EndOfPartition",
    "PartitionEvent",
    "PartitionEvents",
    "Watermark",
    "WatermarkStatus",
]

MIN_WATERMARK = -(2**63)
"""Watermark before any event time is known (Long.MIN_VALUE, as Flink)."""
MAX_WATERMARK = 2**63 - 1
"""Final watermark at the end of bounded input: every window fires (Long.MAX_VALUE)."""


@dataclass(frozen=True)
class DataBundle:
    """One file of records for one subpartition.

    Attributes:
        path: Parquet file in the exchange store.
        rows: Number of rows in it.
        min_window_end_ms: Smallest window end among its rows (epoch ms), or None if unknown.
        max_window_end_ms: Largest window end among its rows (epoch ms), or None if unknown.
        size_bytes: Size of the file (bytes; 0 if unknown): counted by flow control.
    """

    path: str
    rows: int
    min_window_end_ms: int | None = None
    max_window_end_ms: int | None = None
    size_bytes: int = 0


@dataclass(frozen=True)
class Watermark:
    """No later record of this channel has event time <= ``timestamp_ms`` (epoch ms)."""

    timestamp_ms: int


@dataclass(frozen=True)
class WatermarkStatus:
    """Whether this channel's watermarks count (Flink's WatermarkStatus).

    A source subtask with nothing to read (an unbounded source waiting for splits) goes idle,
    so that its silence does not hold back everyone's event time; it turns active again before
    its next records.

    Attributes:
        active: False when the channel goes idle, True when it resumes.
    """

    active: bool


@dataclass(frozen=True)
class CheckpointBarrier:
    """Everything before this event belongs to checkpoint ``checkpoint_id``, nothing after.

    Attributes:
        checkpoint_id: The checkpoint (strictly increasing per job).
        timestamp_ms: When the CheckpointCoordinator triggered it (epoch ms).
    """

    checkpoint_id: int
    timestamp_ms: int


@dataclass(frozen=True)
class EndOfPartition:
    """The producer finished; no event follows."""


@dataclass(frozen=True)
class AckRequest:
    """The producer asks the consumer to acknowledge every event up to this one (seed 001's
    AckRequest); its own sequence number is what the Ack names."""


@dataclass(frozen=True)
class Ack:
    """The consumer has taken every event of the channel up to ``sequence`` (seed 001's Ack).

    Attributes:
        session_id: The channel session the AckRequest came from.
        sequence: The AckRequest's sequence number.
        received: Events of that session the consumer has taken so far, the AckRequest
            included (= ``sequence`` + 1 when nothing was lost).
    """

    session_id: int
    sequence: int
    received: int


PartitionEvent = (
    DataBundle | Watermark | WatermarkStatus | CheckpointBarrier | EndOfPartition | AckRequest
)


@dataclass(frozen=True)
class PartitionEvents:
    """Reply to a consumer's pull: ``events`` starting at index ``from_index`` of the
    subpartition's log.

    Attributes:
        from_index: Log index of the first event.
        events: The events.
        session_ids: Per event, the channel session it was sent in (empty: unchecked, as
            from a scripted test producer).
        sequences: Per event, its sequence number in the channel (empty: unchecked).
    """

    from_index: int
    events: tuple[PartitionEvent, ...]
    session_ids: tuple[int, ...] = ()
    sequences: tuple[int, ...] = ()
