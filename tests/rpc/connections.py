"""What a TcpRpcService's connections have heard: the positive event of the keepalive tests."""

from __future__ import annotations

import asyncio
import time

from millrace.rpc.tcp.tcp_rpc_service import TcpRpcService
from tests.waiting import WAIT, wait_until

__all__ = ["heard_through", "open_connections"]


def open_connections(service: TcpRpcService) -> list[tuple[object, float]]:
    """``service``'s open connections, each with when it last heard its peer
    (``time.monotonic()``), read on the service's event-loop thread."""

    async def read() -> list[tuple[object, float]]:
        return [(c, c.last_received) for c in service._all_connections()]

    return asyncio.run_coroutine_threadsafe(read(), service._loop).result(WAIT)


def heard_through(service: TcpRpcService, silence: float) -> object:
    """Wait until ``service``'s only connection has heard its peer (a PING or PONG, no call)
    ``silence`` seconds after now, still open: proof that keepalives held it past the point
    where that much silence would have closed it. Returns that connection.

    Raises:
        AssertionError: If it did not, within ``silence`` + ``WAIT`` s, or there is not
            exactly one connection.
    """
    [(link, _)] = open_connections(service)
    since = time.monotonic()
    wait_until(
        lambda: any(
            c is link and heard >= since + silence for c, heard in open_connections(service)
        ),
        what=f"the same connection hearing its peer {silence} s into the silence",
        timeout=silence + WAIT,
        seen=lambda: open_connections(service),
    )
    return link
