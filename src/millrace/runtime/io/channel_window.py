"""The producer end of a channel's flow control: seed 001's sliding window with AckRequest/Ack.

A channel is one producer subtask -> one consumer subtask (a subpartition of the producer's
result partition). The producer may have at most ``max_unacked_bundles`` bundles and
``max_unacked_bytes`` exchange-file bytes sent and not yet acknowledged on it; it puts an
``AckRequest`` into the channel after every ``ack_request_interval`` bundles, and at once when
the window fills (so a full window always has a request in flight: no wait for an Ack that
nobody asked for). The consumer answers an AckRequest with an ``Ack`` once it has taken every
event before it; the Ack frees the bundles up to the request. Barriers, watermarks and other
events are never held back by the window (only bundles are counted), so checkpoint barriers
keep flowing while a producer waits for room.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from millrace.config import Configuration, FlowControlOptions
from millrace.runtime.io.partition_events import Ack

__all__ = ["ChannelWindow", "FlowControlSettings"]


@dataclass(frozen=True)
class FlowControlSettings:
    """The ``taskmanager.network.flow-control.*`` keys.

    Attributes:
        enabled: False: no window, no AckRequests (unbounded partitions).
        max_unacked_bundles: Bundles unacknowledged per channel, at most (>= 1).
        max_unacked_bytes: Bytes unacknowledged per channel, at most (>= 1; one bundle is
            always allowed, however large).
        ack_request_interval: Bundles between two AckRequests (>= 1).
    """

    enabled: bool = True
    max_unacked_bundles: int = 16
    max_unacked_bytes: int = 256 * 1024 * 1024
    ack_request_interval: int = 4

    @classmethod
    def from_configuration(cls, conf: Configuration) -> FlowControlSettings:
        """Read (and validate) the keys.

        Raises:
            ConfigError: If a key is invalid, naming it.
        """
        return cls(
            conf.get(FlowControlOptions.ENABLED),
            conf.get(FlowControlOptions.MAX_UNACKED_BUNDLES),
            conf.get(FlowControlOptions.MAX_UNACKED_BYTES),
            conf.get(FlowControlOptions.ACK_REQUEST_INTERVAL),
        )


class ChannelWindow:
    """Sequence numbers and the unacknowledged bundles of one channel (pure accounting).

    Args:
        settings: The window's bounds.
        session_id: The channel's session (this producer attempt's).

    Attributes:
        next_sequence: Sequence number the next event gets (0 first).
        unacked_bytes: Bytes of the unacknowledged bundles.
        acked: Sequence number of the latest Ack's AckRequest (-1 before any).
        lost: The most events of the session any Ack reported missing (sent up to its
            AckRequest minus received: Gearpump's loss check at the sender). 0 while the
            consumer's own sequence check holds, which fails the consumer at the first gap
            or stale event before it answers a later AckRequest; the partition logs a rise
            and reports the sum over its channels (``ResultPartition.lost_events``).

    Threading:
        One thread (the owning TaskExecutor's main thread).
    """

    def __init__(self, settings: FlowControlSettings, session_id: int) -> None:
        self.settings = settings
        self.session_id = session_id
        self.next_sequence = 0
        self._unacked: deque[tuple[int, int]] = deque()  # (sequence, bytes) of bundles
        self.unacked_bytes = 0
        self._since_request = 0
        self.acked = -1
        self.lost = 0

    def stamp(self) -> int:
        """Take the next sequence number."""
        sequence = self.next_sequence
        self.next_sequence += 1
        return sequence

    @property
    def unacked_bundles(self) -> int:
        return len(self._unacked)

    def on_bundle(self, sequence: int, size_bytes: int) -> None:
        """A bundle went out with ``sequence``; it occupies the window until acknowledged."""
        if not self.settings.enabled:
            return
        self._unacked.append((sequence, size_bytes))
        self.unacked_bytes += size_bytes
        self._since_request += 1

    @property
    def has_room(self) -> bool:
        """Whether another bundle may go out (always, with flow control off)."""
        s = self.settings
        if not s.enabled or not self._unacked:
            return True
        return len(self._unacked) < s.max_unacked_bundles and self.unacked_bytes < (
            s.max_unacked_bytes
        )

    @property
    def ack_request_due(self) -> bool:
        """An AckRequest should follow now: ``ack_request_interval`` bundles since the last,
        or the window is full with bundles that no request covers yet."""
        if not self.settings.enabled or self._since_request == 0:
            return False
        return self._since_request >= self.settings.ack_request_interval or not self.has_room

    def on_ack_request(self) -> None:
        """An AckRequest went out (after the bundles counted so far)."""
        self._since_request = 0

    def on_ack(self, ack: Ack) -> bool:
        """Free the bundles sent before ``ack.sequence``.

        Returns:
            False if the Ack is ignored: of another session (a stale consumer's answer to an
            earlier attempt) or not newer than the latest one.
        """
        if ack.session_id != self.session_id or ack.sequence <= self.acked:
            return False
        self.acked = ack.sequence
        self.lost = max(self.lost, ack.sequence + 1 - ack.received)
        while self._unacked and self._unacked[0][0] < ack.sequence:
            self.unacked_bytes -= self._unacked.popleft()[1]
        return True

    def __repr__(self) -> str:
        return (
            f"ChannelWindow(session={self.session_id}, next={self.next_sequence}, "
            f"unacked={len(self._unacked)} bundles/{self.unacked_bytes} B, acked={self.acked})"
        )
