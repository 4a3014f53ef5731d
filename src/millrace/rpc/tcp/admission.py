"""Admission control of a TcpRpcService's listener: connections not yet authenticated (issue 9).

A connection costs a descriptor and a little memory from the moment it is accepted until it
has proven the cluster secret (``rpc.handshake.timeout`` at most). :class:`HandshakeAdmission`
caps how many such connections a service holds, in all (``rpc.handshake.max-pending``) and
per peer IP address (``rpc.handshake.max-pending-per-address``): a connection over a cap is
closed as soon as it is accepted (and while every slot is taken, the service pauses accepting
for a moment after each refusal, so that a reconnecting flood costs it little CPU).
Authenticated connections are not counted. Refusals are logged by :class:`ThrottledLog`, at
most once per interval per kind, with the count since.

Threading:
    The service's event-loop thread only.
"""

from __future__ import annotations

import logging
import time
from collections import Counter

__all__ = ["HandshakeAdmission", "ThrottledLog"]

logger = logging.getLogger(__name__)


class ThrottledLog:
    """Warnings that may come in floods: the first of a kind is logged, then at most one per
    ``interval`` seconds, saying how many were not logged.

    Args:
        interval: Seconds between two lines of one kind.
    """

    def __init__(self, interval: float = 10.0) -> None:
        self._interval = interval
        self._next: dict[str, float] = {}
        self._suppressed: Counter[str] = Counter()

    def warning(self, kind: str, message: str, *args: object) -> None:
        """Log ``message % args`` unless a line of ``kind`` was logged within the interval."""
        now = time.monotonic()
        if now < self._next.get(kind, 0.0):
            self._suppressed[kind] += 1
            return
        self._next[kind] = now + self._interval
        suppressed = self._suppressed.pop(kind, 0)
        if suppressed:
            message += f" ({suppressed} more like it since the last line)"
        logger.warning(message, *args)


class HandshakeAdmission:
    """Counts the connections being authenticated, per peer address and in all.

    Args:
        max_pending: ``rpc.handshake.max-pending``.
        max_pending_per_address: ``rpc.handshake.max-pending-per-address``.
        log: Where refusals are reported.
    """

    def __init__(self, max_pending: int, max_pending_per_address: int, log: ThrottledLog) -> None:
        self.max_pending = max_pending
        self.max_pending_per_address = max_pending_per_address
        self._log = log
        self._per_address: Counter[str] = Counter()
        self.pending = 0

    @property
    def full(self) -> bool:
        """Whether every slot of ``rpc.handshake.max-pending`` is taken."""
        return self.pending >= self.max_pending

    def admit(self, address: str) -> bool:
        """Count a connection from ``address`` if both caps allow it; log a refusal.

        Returns:
            True if admitted (call :meth:`release` once its handshake ends), False if it must
            be closed now.
        """
        if self.pending >= self.max_pending:
            self._log.warning(
                "pending",
                "refused a connection from %s: %d connections are proving the secret "
                "(rpc.handshake.max-pending=%d)",
                address,
                self.pending,
                self.max_pending,
            )
            return False
        if self._per_address[address] >= self.max_pending_per_address:
            self._log.warning(
                "per-address",
                "refused a connection from %s: %d connections from that address are proving "
                "the secret (rpc.handshake.max-pending-per-address=%d)",
                address,
                self._per_address[address],
                self.max_pending_per_address,
            )
            return False
        self.pending += 1
        self._per_address[address] += 1
        return True

    def release(self, address: str) -> None:
        """The handshake of a connection admitted from ``address`` ended (either way)."""
        self.pending -= 1
        left = self._per_address[address] - 1
        if left > 0:
            self._per_address[address] = left
        else:
            del self._per_address[address]
