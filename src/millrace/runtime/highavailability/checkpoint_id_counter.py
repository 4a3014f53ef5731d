"""Checkpoint id counters (Flink's CheckpointIDCounter): where a job's checkpoint ids come from.

Under high availability the counter is ``jobs/<job-id>/checkpoint_id_counter`` in ZooKeeper
(Flink's ZooKeeperCheckpointIDCounter): every id is reserved there, durably and fenced by the
leader's latch, before its checkpoint is triggered. So a new leader never hands out an id its
predecessor did, whether that checkpoint completed, was only triggered (its tasks may have
written state and staged sink data under that id), or was a savepoint. Without high
availability the ids live in the JobMaster's memory (the coordinator's own count).
"""

from __future__ import annotations

import threading
from typing import Protocol

from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import NoNodeError

from millrace.errors import HighAvailabilityError, LeadershipLostError
from millrace.runtime.highavailability.leader_election import Fence
from millrace.runtime.highavailability.zookeeper_client import zookeeper_errors
from millrace.runtime.highavailability.zookeeper_paths import ZooKeeperPaths
from millrace.types import JobId

__all__ = ["CheckpointIdCounter", "StandaloneCheckpointIdCounter", "ZooKeeperCheckpointIdCounter"]

_ATTEMPTS = 10  # compare-and-set rounds before giving up (one leader writes: one suffices)


class CheckpointIdCounter(Protocol):
    """The source of one job's checkpoint ids.

    Raises:
        HighAvailabilityError: If ZooKeeper fails; LeadershipLostError from
            ``get_and_increment`` of a former leader.

    Threading:
        Blocking I/O (ZooKeeper): an I/O thread, never an endpoint's main thread.
    """

    def get_and_increment(self, at_least: int = 1) -> int:
        """Reserve the next id: the counter's value, raised to ``at_least`` first (a restored
        savepoint's id + 1, as Flink's ``setCount``); the counter is past it on return."""
        ...

    def next_id(self) -> int:
        """The id the next ``get_and_increment`` hands out at least (1 for a new job); Flink's
        ``get``."""
        ...


class StandaloneCheckpointIdCounter:
    """No high availability: the ids live in this process's memory."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next = 1

    def get_and_increment(self, at_least: int = 1) -> int:
        with self._lock:
            handed = max(self._next, at_least)
            self._next = handed + 1
            return handed

    def next_id(self) -> int:
        with self._lock:
            return self._next


class ZooKeeperCheckpointIdCounter:
    """The counter in ZooKeeper: the next id, as decimal text, compared and set by version in
    a transaction that also checks the leader's latch.

    Args:
        client: A started kazoo client.
        paths: The cluster's znodes.
        job_id: The job.
        fence: The leadership term the reservations belong to.
    """

    def __init__(
        self, client: KazooClient, paths: ZooKeeperPaths, job_id: JobId, fence: Fence
    ) -> None:
        self._client = client
        self._paths = paths
        self._job_id = job_id
        self._fence = fence
        self._node = paths.checkpoint_id_counter(job_id)

    def _read(self) -> tuple[int, int | None]:
        """(next id, the znode's version; None if there is none yet)."""
        try:
            data, stat = self._client.get(self._node)
        except NoNodeError:
            return 1, None
        return int(data.decode()), stat.version

    def _reserve(self, at_least: int) -> int | None:
        """One compare-and-set round: the id reserved, or None if another writer came first."""
        current, version = self._read()
        if version is None:
            self._client.ensure_path(self._paths.job(self._job_id))
        handed = max(current, at_least)
        value = str(handed + 1).encode()

        def build(t: TransactionRequest) -> None:
            if version is None:
                t.create(self._node, value)
            else:
                t.set_data(self._node, value, version=version)

        try:
            self._fence.commit(build)
        except LeadershipLostError:
            raise
        except HighAvailabilityError:  # the version moved, or the znode appeared
            return None
        return handed

    def _get_and_increment(self, at_least: int) -> int:
        for _ in range(_ATTEMPTS):
            handed = self._reserve(at_least)
            if handed is not None:
                return handed
        raise HighAvailabilityError(
            f"job {self._job_id}: the checkpoint id counter kept changing ({_ATTEMPTS} tries)"
        )

    def get_and_increment(self, at_least: int = 1) -> int:
        what = f"job {self._job_id}: reserving a checkpoint id"
        with self._fence.writing(what), zookeeper_errors(what):
            return self._get_and_increment(at_least)

    def next_id(self) -> int:
        with zookeeper_errors(f"job {self._job_id}: reading the checkpoint id counter"):
            return self._read()[0]
