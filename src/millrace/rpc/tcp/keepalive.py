"""Keepalive: authenticated connections that go silent are pinged, then closed (issue 9).

Every third of ``rpc.idle-timeout``, a TcpRpcService looks at its connections: one it has
heard nothing from for that long gets a ``PING`` (the peer answers ``PONG`` at once, whatever
its own settings); one it has heard nothing from for the whole timeout is closed, with a log
line naming the key. A peer that vanished without a word (a cut network, a frozen process)
thus stops holding a descriptor, a read buffer and its pending calls.

The checks are timed by a thread of their own that hands each one to the event loop: a
standing ``call_later`` timer on the loop would make every epoll wait arm a kernel timer,
which cost about 5 us of CPU per ask here.

Threading:
    :meth:`Keepalive.start` and :meth:`Keepalive.stop`: any thread. The checks run on the
    service's event-loop thread.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterable

from millrace.rpc.tcp.connection import Connection

__all__ = ["Keepalive"]

logger = logging.getLogger(__name__)


class Keepalive:
    """Pings silent connections and closes dead ones.

    Args:
        name: Thread name prefix (``<name>-keepalive``).
        loop: The service's event loop (the checks run there).
        idle_timeout: ``rpc.idle-timeout`` in seconds.
        connections: The service's current connections (called on the loop thread).
    """

    def __init__(
        self,
        name: str,
        loop: asyncio.AbstractEventLoop,
        idle_timeout: float,
        connections: Callable[[], Iterable[Connection]],
    ) -> None:
        self._loop = loop
        self._idle_timeout = idle_timeout
        self._connections = connections
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._tick, name=f"{name}-keepalive", daemon=True)

    def start(self) -> None:
        """Start timing the checks."""
        self._thread.start()

    def stop(self) -> None:
        """Stop timing the checks and join the thread (it ends at once)."""
        self._stopped.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=10)

    def _tick(self) -> None:
        while not self._stopped.wait(self._idle_timeout / 3):
            try:
                self._loop.call_soon_threadsafe(self.check)
            except RuntimeError:  # the loop is closed
                return

    def check(self) -> None:
        """Ping the connections silent for a third of the timeout, close those silent for all
        of it.

        Threading:
            The event-loop thread.
        """
        if self._stopped.is_set():
            return
        now = time.monotonic()
        for connection in list(self._connections()):
            if connection.closed:
                continue
            silent = now - connection.last_received
            if silent > self._idle_timeout:
                reason = (
                    f"nothing received for {silent:.1f} s "
                    f"(rpc.idle-timeout={self._idle_timeout:g} s)"
                )
                logger.warning("closing connection with %s: %s", connection.peer, reason)
                connection.close(reason)
            elif silent >= self._idle_timeout / 3:
                connection.ping()
