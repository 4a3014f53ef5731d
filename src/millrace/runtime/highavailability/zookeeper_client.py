"""The kazoo client of one process, built from ``high-availability.zookeeper.*``.

Every ZooKeeper call of Millrace goes through kazoo (sessions, retries, watches, recipes); this
module only translates the configuration and kazoo's connection errors.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry

from millrace.config import Configuration, HighAvailabilityOptions
from millrace.errors import HighAvailabilityError

__all__ = [
    "reconnect_delay_cap",
    "start_zookeeper_client",
    "stop_zookeeper_client",
    "zookeeper_errors",
]

logger = logging.getLogger(__name__)

_MAX_RETRY_DELAY = 10.0  # seconds: cap of the doubling retry wait


def start_zookeeper_client(configuration: Configuration) -> KazooClient:
    """A started, connected kazoo client.

    Session timeout, connection timeout, retry wait and attempts come from the
    ``high-availability.zookeeper.client.*`` keys (s). Connection attempts after a loss are
    retried forever (the session may still be alive), the doubling wait between them capped
    by :func:`reconnect_delay_cap`; single operations up to
    ``max-retry-attempts`` times.

    Raises:
        HighAvailabilityError: If no server of the quorum answers within the connection
            timeout (names the quorum).

    Threading:
        Any thread; blocks up to the connection timeout.
    """
    quorum = configuration.get(HighAvailabilityOptions.ZOOKEEPER_QUORUM)
    wait = configuration.get(HighAvailabilityOptions.RETRY_WAIT)
    connection_timeout = configuration.get(HighAvailabilityOptions.CONNECTION_TIMEOUT)
    session_timeout = configuration.get(HighAvailabilityOptions.SESSION_TIMEOUT)
    client = KazooClient(
        hosts=quorum,
        timeout=session_timeout,
        connection_retry=KazooRetry(
            max_tries=-1, delay=wait, max_delay=reconnect_delay_cap(session_timeout)
        ),
        command_retry=KazooRetry(
            max_tries=configuration.get(HighAvailabilityOptions.MAX_RETRY_ATTEMPTS),
            delay=wait,
            max_delay=_MAX_RETRY_DELAY,
        ),
    )
    try:
        client.start(timeout=connection_timeout)
    except KazooTimeoutError:
        client.close()
        raise HighAvailabilityError(
            f"no ZooKeeper server of {quorum!r} answered within {connection_timeout:g} s "
            f"(high-availability.zookeeper.quorum); is it running? "
            f"'millrace zookeeper start' runs one for development"
        ) from None
    logger.info("connected to ZooKeeper %s", quorum)
    return client


def reconnect_delay_cap(session_timeout: float) -> float:
    """Longest wait between two connection attempts after a loss, in s: a quarter of the
    session timeout (at most 10 s), so that with kazoo's jitter (up to 1.4x) a client retries
    well within the session timeout of a server coming back. A ZooKeeper server restores its
    sessions at restart and expires each one the session timeout after, unless its client
    reconnected; a doubling wait that grew during a long outage would miss that window. The
    first wait is the configured retry wait itself: one longer than the session timeout gives
    the session up after any disconnection, as configured."""
    return min(_MAX_RETRY_DELAY, session_timeout / 4)


def stop_zookeeper_client(client: KazooClient) -> None:
    """Stop and close ``client`` (its ephemeral znodes go at once). Idempotent."""
    try:
        client.stop()
    finally:
        client.close()


@contextmanager
def zookeeper_errors(what: str) -> Iterator[None]:
    """Translate kazoo's errors inside the block into HighAvailabilityError naming ``what``."""
    try:
        yield
    except (KazooException, KazooTimeoutError) as error:
        raise HighAvailabilityError(f"{what}: ZooKeeper: {error!r}") from error
