"""The consumer end of seed 001's message-loss detection: each channel's session and sequence.

Every event of a channel carries the channel's session id (a function of the producer attempt's
result partition id, so new for every deployment or restart of the producer: see
:func:`channel_session_id`) and its sequence number (0, 1, 2, ... in the channel). The consumer
expects exactly the next number of its current session: a larger one is a gap (events lost), a
smaller one a repeat, another session a stale producer attempt (a zombie's event). Each fails the
consuming task with :class:`~millrace.errors.MessageLossError` before the event is handed to the
task, so an event of an old session is dropped, never processed; the job then recovers from its
latest checkpoint by its restart strategy.
"""

from __future__ import annotations

import hashlib

from millrace.errors import MessageLossError

__all__ = ["ChannelSequence", "channel_session_id"]


def channel_session_id(partition_id: str) -> int:
    """The session id of every channel of result partition ``partition_id`` (the producer
    attempt's id): a 63-bit number, the same on both ends of the channel."""
    digest = hashlib.blake2b(partition_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


class ChannelSequence:
    """What one consumer channel expects next.

    Args:
        channel: Name of the channel for errors (producer, consumer, partition).
        session_id: The channel's current session.

    Attributes:
        expected: The next sequence number expected.
        received: Events of the session taken so far (= ``expected`` while nothing is lost).

    Threading:
        The consumer's task thread.
    """

    def __init__(self, channel: str, session_id: int) -> None:
        self.channel = channel
        self.session_id = session_id
        self.expected = 0
        self.received = 0

    def check(self, session_id: int, sequence: int) -> None:
        """Accept the event ``sequence`` of ``session_id``, or fail.

        Raises:
            MessageLossError: On a stale session, a gap or a repeat (naming the channel, what
                was expected and what was seen).
        """
        if session_id != self.session_id:
            raise MessageLossError(self.channel, "stale session", self.session_id, session_id)
        if sequence != self.expected:
            kind = "gap" if sequence > self.expected else "repeat"
            raise MessageLossError(self.channel, kind, self.expected, sequence)
        self.expected += 1
        self.received += 1
