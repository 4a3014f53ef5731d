"""The kazoo client's reconnection: its doubling wait between connection attempts stays well
inside the session timeout, so a client finds a restarted ZooKeeper server while the session
the server restored is still alive (``zookeeper_client.reconnect_delay_cap``)."""

from __future__ import annotations

import pytest

from millrace.runtime.highavailability.zookeeper_client import (
    reconnect_delay_cap,
    start_zookeeper_client,
    stop_zookeeper_client,
)
from tests.runtime.highavailability.ha_processes import JobManagers


@pytest.mark.parametrize("session_timeout_s", [2.0, 4.0, 60.0, 600.0])
def test_the_cap_is_a_quarter_of_the_session_timeout_and_at_most_10_s(
    session_timeout_s: float,
) -> None:
    assert reconnect_delay_cap(session_timeout_s) == min(10.0, session_timeout_s / 4)


def test_a_client_never_waits_half_a_session_timeout_between_connection_attempts(
    jobmanagers: JobManagers,
) -> None:
    """kazoo's jitter stretches a wait up to 1.4x; even so the longest wait between two
    attempts is under half the session timeout (uncapped, it grew to 10 s: CI saw a 2 s
    session expire after an outage of 2.5 s)."""
    configuration = jobmanagers.configuration(
        **{
            "high-availability.zookeeper.client.session-timeout": "4 s",
            "high-availability.zookeeper.client.retry-wait": "10 ms",
        }
    )
    client = start_zookeeper_client(configuration)
    try:
        retry = client._conn_retry  # kazoo keeps the connection retry policy here
        assert retry.max_tries == -1  # forever: the session may still be alive
        assert retry.delay == pytest.approx(0.01)
        assert retry.max_delay * (1 + retry.max_jitter) < 4.0 / 2
    finally:
        stop_zookeeper_client(client)
