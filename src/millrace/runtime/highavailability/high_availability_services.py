"""HighAvailabilityServices: what a JobManager process needs of its HA mode (Flink's
HighAvailabilityServices), chosen by ``high-availability.type``.

``none`` (:class:`NoHighAvailabilityServices`): one JobManager, a fixed leader session, stores
that keep nothing. ``zookeeper`` (:class:`ZooKeeperHaServices`): a kazoo client, leader
election, leader retrieval, and stores whose writes are fenced by the leader's latch.
"""

from __future__ import annotations

from typing import Protocol

from kazoo.client import KazooClient

from millrace.config import Configuration, HighAvailabilityMode, HighAvailabilityOptions
from millrace.runtime.control_messages import control_message_codec
from millrace.runtime.highavailability.checkpoint_id_counter import (
    CheckpointIdCounter,
    StandaloneCheckpointIdCounter,
    ZooKeeperCheckpointIdCounter,
)
from millrace.runtime.highavailability.completed_checkpoint_store import (
    CompletedCheckpointStore,
    NoCompletedCheckpointStore,
    ZooKeeperCheckpointStore,
)
from millrace.runtime.highavailability.ha_storage import HaStorage
from millrace.runtime.highavailability.job_graph_store import (
    JobGraphStore,
    NoJobGraphStore,
    ZooKeeperJobGraphStore,
)
from millrace.runtime.highavailability.job_result_store import (
    FileSystemJobResultStore,
    JobResultStore,
    NoJobResultStore,
)
from millrace.runtime.highavailability.leader_election import (
    Fence,
    LeaderContender,
    ZooKeeperLeaderElection,
)
from millrace.runtime.highavailability.zookeeper_client import (
    start_zookeeper_client,
    stop_zookeeper_client,
)
from millrace.runtime.highavailability.zookeeper_paths import ZooKeeperPaths
from millrace.types import DEFAULT_LEADER_SESSION_ID, JobId

__all__ = [
    "DEFAULT_LEADER_SESSION_ID",
    "HighAvailabilityServices",
    "LeaderServices",
    "NoHighAvailabilityServices",
    "ZooKeeperHaServices",
    "create_high_availability_services",
]


class LeaderServices(Protocol):
    """What one leadership term may do: every write is fenced by its leader session.

    Threading:
        ``check_leadership`` and the stores block on ZooKeeper or the storage: I/O threads.
    """

    leader_session_id: str

    def check_leadership(self) -> None:
        """Raises LeadershipLostError unless this term still leads."""

    def job_graph_store(self) -> JobGraphStore: ...

    def job_result_store(self) -> JobResultStore: ...

    def checkpoint_store(self, job_id: JobId) -> CompletedCheckpointStore: ...

    def checkpoint_id_counter(self, job_id: JobId) -> CheckpointIdCounter:
        """Where the job's checkpoint ids come from (Flink's CheckpointIDCounter)."""
        ...

    def publish(self, component: str, address: str) -> None:
        """Publish a component's leader address (ZooKeeper only)."""

    def unpublish(self, component: str) -> None: ...


class HighAvailabilityServices(Protocol):
    """A JobManager process's HA services."""

    def start_leader_election(self, contender: LeaderContender, identifier: str) -> None:
        """Contend; the contender is granted leadership with a leader session id."""

    def leader_services(self, leader_session_id: str) -> LeaderServices: ...

    def close(self) -> None: ...


class _NoLeaderServices:
    leader_session_id = DEFAULT_LEADER_SESSION_ID

    def check_leadership(self) -> None:
        pass

    def job_graph_store(self) -> JobGraphStore:
        return NoJobGraphStore()

    def job_result_store(self) -> JobResultStore:
        return NoJobResultStore()

    def checkpoint_store(self, job_id: JobId) -> CompletedCheckpointStore:
        return NoCompletedCheckpointStore()

    def checkpoint_id_counter(self, job_id: JobId) -> CheckpointIdCounter:
        return StandaloneCheckpointIdCounter()

    def publish(self, component: str, address: str) -> None:
        pass

    def unpublish(self, component: str) -> None:
        pass


class NoHighAvailabilityServices:
    """``high-availability.type: none``: the only JobManager leads at once, for good."""

    def start_leader_election(self, contender: LeaderContender, identifier: str) -> None:
        contender.grant_leadership(DEFAULT_LEADER_SESSION_ID)

    def leader_services(self, leader_session_id: str) -> LeaderServices:
        return _NoLeaderServices()

    def close(self) -> None:
        pass


class _ZooKeeperLeaderServices:
    def __init__(self, services: ZooKeeperHaServices, leader_session_id: str) -> None:
        self.leader_session_id = leader_session_id
        self._services = services
        election = services.election
        assert election is not None, "leader services before the election started"
        self._election = election
        self._fence = Fence(election, leader_session_id)

    def check_leadership(self) -> None:
        self._fence.check()

    def job_graph_store(self) -> JobGraphStore:
        s = self._services
        return ZooKeeperJobGraphStore(s.client, s.paths, s.storage, s.codec, self._fence)

    def job_result_store(self) -> JobResultStore:
        return FileSystemJobResultStore(
            self._services.storage, self._services.codec, self.check_leadership
        )

    def checkpoint_store(self, job_id: JobId) -> CompletedCheckpointStore:
        return ZooKeeperCheckpointStore(
            self._services.client, self._services.paths, job_id, self._fence
        )

    def checkpoint_id_counter(self, job_id: JobId) -> CheckpointIdCounter:
        return ZooKeeperCheckpointIdCounter(
            self._services.client, self._services.paths, job_id, self._fence
        )

    def publish(self, component: str, address: str) -> None:
        self._election.publish(self.leader_session_id, component, address)

    def unpublish(self, component: str) -> None:
        self._election.unpublish(self.leader_session_id, component)


class ZooKeeperHaServices:
    """``high-availability.type: zookeeper``.

    Args:
        configuration: The process's configuration (validated).

    Raises:
        HighAvailabilityError: If ZooKeeper does not answer within the connection timeout.
    """

    def __init__(self, configuration: Configuration) -> None:
        self._configuration = configuration
        self.paths = ZooKeeperPaths.from_configuration(configuration)
        self.storage = HaStorage.from_configuration(configuration)
        self.codec = control_message_codec()
        self.client: KazooClient = start_zookeeper_client(configuration)
        self.election: ZooKeeperLeaderElection | None = None

    def start_leader_election(self, contender: LeaderContender, identifier: str) -> None:
        self.election = ZooKeeperLeaderElection(
            self.client,
            self.paths,
            contender,
            self._configuration.get(HighAvailabilityOptions.TOLERATE_SUSPENDED_CONNECTIONS),
            identifier,
            self._configuration.get(HighAvailabilityOptions.SESSION_TIMEOUT),
        ).start()

    def leader_services(self, leader_session_id: str) -> LeaderServices:
        return _ZooKeeperLeaderServices(self, leader_session_id)

    def close(self) -> None:
        if self.election is not None:
            self.election.close()
        stop_zookeeper_client(self.client)


def create_high_availability_services(configuration: Configuration) -> HighAvailabilityServices:
    """The services ``high-availability.type`` names.

    Raises:
        HighAvailabilityError: If ZooKeeper does not answer.
    """
    if configuration.get(HighAvailabilityOptions.TYPE) is HighAvailabilityMode.ZOOKEEPER:
        return ZooKeeperHaServices(configuration)
    return NoHighAvailabilityServices()
