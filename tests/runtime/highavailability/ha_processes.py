"""Helpers of the high-availability tests: JobManager-like processes (ZooKeeperHaServices)
contending on the test's own ZooKeeper (fixture ``jobmanagers``), a plain kazoo client
(fixture ``observer``), a contender that records what it was told, and the classic way to lose
a ZooKeeper session for real (a twin client closes it)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from millrace.config import Configuration
from millrace.runtime.highavailability.high_availability_services import ZooKeeperHaServices
from millrace.runtime.highavailability.local_zookeeper import LocalZooKeeper
from tests.waiting import wait_until

__all__ = [
    "CONNECT_WAIT",
    "LEADER_WAIT",
    "JobManagers",
    "RecordingContender",
    "StateLog",
    "expire_session",
    "jobmanagers",
    "observer",
]

LEADER_WAIT = 15.0  # seconds: deadline of a grant or a revocation (they take milliseconds)
CONNECT_WAIT = 10.0  # seconds for a kazoo client to connect


class RecordingContender:
    """A LeaderContender that records its grants and revocations, in order.

    Threading:
        Called on the election's thread; read from the test's.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.events: list[tuple[str, str | None]] = []

    def grant_leadership(self, leader_session_id: str) -> None:
        with self._lock:
            self.events.append(("granted", leader_session_id))

    def revoke_leadership(self) -> None:
        with self._lock:
            self.events.append(("revoked", None))

    @property
    def grants(self) -> list[str]:
        with self._lock:
            return [session for kind, session in self.events if kind == "granted"]

    @property
    def revocations(self) -> int:
        with self._lock:
            return sum(1 for kind, _ in self.events if kind == "revoked")

    @property
    def leader_session_id(self) -> str | None:
        """The session of the current grant, or None if never granted or revoked since."""
        with self._lock:
            if not self.events or self.events[-1][0] != "granted":
                return None
            return self.events[-1][1]

    def wait_granted(self, timeout: float = LEADER_WAIT, *, grants: int = 1) -> str:
        """The session of the ``grants``-th grant, once granted and not revoked."""
        wait_until(
            lambda: len(self.grants) >= grants and self.leader_session_id is not None,
            what=f"grant number {grants}",
            timeout=timeout,
            seen=lambda: self.events,
        )
        session = self.leader_session_id
        assert session is not None
        return session

    def wait_revoked(self, timeout: float = LEADER_WAIT, *, revocations: int = 1) -> None:
        wait_until(
            lambda: self.revocations >= revocations,
            what=f"revocation number {revocations}",
            timeout=timeout,
            seen=lambda: self.events,
        )


class JobManagers:
    """Starts ZooKeeperHaServices on the test's ZooKeeper and closes every one in teardown."""

    def __init__(self, zookeeper: LocalZooKeeper, storage_dir: Path) -> None:
        self.zookeeper = zookeeper
        self.storage_dir = storage_dir
        self._started: list[ZooKeeperHaServices] = []
        self._closed: set[int] = set()

    def configuration(self, **settings: str) -> Configuration:
        return Configuration(
            {
                "high-availability.type": "zookeeper",
                "high-availability.zookeeper.quorum": self.zookeeper.connect_string,
                "high-availability.storageDir": str(self.storage_dir),
                "high-availability.cluster-id": "/unit",
                "high-availability.zookeeper.client.retry-wait": "100 ms",
                **settings,
            }
        )

    def start(self, **settings: str) -> ZooKeeperHaServices:
        """Services connected to ZooKeeper, not contending yet."""
        services = ZooKeeperHaServices(self.configuration(**settings))
        self._started.append(services)
        return services

    def contend(
        self, identifier: str, **settings: str
    ) -> tuple[ZooKeeperHaServices, RecordingContender]:
        """Services contending for the leadership with a RecordingContender."""
        services = self.start(**settings)
        contender = RecordingContender()
        services.start_leader_election(contender, identifier)
        return services, contender

    def close(self, services: ZooKeeperHaServices) -> None:
        if id(services) not in self._closed:
            self._closed.add(id(services))
            services.close()

    def close_all(self) -> None:
        for services in reversed(self._started):
            self.close(services)


@pytest.fixture
def jobmanagers(zookeeper: LocalZooKeeper, tmp_path: Path) -> Iterator[JobManagers]:
    """JobManager-like HA services on the test's ZooKeeper, all closed in teardown."""
    managers = JobManagers(zookeeper, tmp_path / "ha")
    try:
        yield managers
    finally:
        managers.close_all()


@pytest.fixture
def observer(zookeeper: LocalZooKeeper) -> Iterator[KazooClient]:
    """A plain kazoo client of the test's (a TaskManager's or an operator's view)."""
    client = KazooClient(hosts=zookeeper.connect_string, timeout=10.0)
    client.start(timeout=CONNECT_WAIT)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def expire_session(zookeeper: LocalZooKeeper, client: KazooClient) -> None:
    """Expire ``client``'s session for real: a twin client joins it with the same id and
    password and closes it (what kazoo's own test harness does). ``client`` learns it on its
    next contact with the server: LOST."""
    client_id = client.client_id
    assert client_id is not None, "the client is not connected"
    twin = KazooClient(hosts=zookeeper.connect_string, client_id=client_id, timeout=10.0)
    twin.start(timeout=CONNECT_WAIT)
    twin.stop()
    twin.close()


class StateLog:
    """The connection states a kazoo client went through (a listener)."""

    def __init__(self, client: KazooClient) -> None:
        self.states: list[str] = []
        client.add_listener(self.states.append)

    def saw(self, state: str) -> bool:
        return state in self.states
