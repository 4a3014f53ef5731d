"""JobGraph stores (Flink's JobGraphStore): the jobs a new leader must recover.

With ZooKeeper, ``jobgraphs/<job-id>`` points to the JobGraph's bytes under the HA storage
directory; without HA the store keeps nothing (jobs live as long as their JobManager).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import NoNodeError

from millrace.errors import HighAvailabilityError
from millrace.rpc.message_codec import MessageCodec
from millrace.runtime.highavailability.ha_storage import HaStorage
from millrace.runtime.highavailability.zookeeper_client import zookeeper_errors
from millrace.runtime.highavailability.zookeeper_paths import ZooKeeperPaths
from millrace.runtime.jobgraph import JobGraph
from millrace.types import JobId

__all__ = ["JobGraphStore", "NoJobGraphStore", "ZooKeeperJobGraphStore"]

logger = logging.getLogger(__name__)

FencedCommit = Callable[[Callable[[TransactionRequest], None]], None]
"""Commits a transaction after checking the leader's latch (``commit_fenced`` of a session)."""


class JobGraphStore(Protocol):
    """Where submitted jobs are kept until they reach a terminal state.

    Raises:
        HighAvailabilityError: From every method, if ZooKeeper or the storage fails;
            LeadershipLostError from ``put``/``remove`` of a former leader.

    Threading:
        Blocking I/O: call from an I/O thread, never an endpoint's main thread.
    """

    def put(self, job_graph: JobGraph) -> None: ...

    def remove(self, job_id: JobId) -> None: ...

    def job_ids(self) -> list[JobId]: ...

    def recover(self, job_id: JobId) -> JobGraph: ...


class NoJobGraphStore:
    """No high availability: nothing is kept, nothing recovered."""

    def put(self, job_graph: JobGraph) -> None:
        pass

    def remove(self, job_id: JobId) -> None:
        pass

    def job_ids(self) -> list[JobId]:
        return []

    def recover(self, job_id: JobId) -> JobGraph:
        raise HighAvailabilityError(f"job {job_id}: no job graph store (high-availability none)")


class ZooKeeperJobGraphStore:
    """Job graphs as znode pointers to files under the HA storage directory.

    Args:
        client: A started kazoo client.
        paths: The cluster's znodes.
        storage: The HA storage directory.
        codec: Encodes a JobGraph (the control-message codec).
        fenced: Commits the leader's transactions (None: read-only, e.g. a standby).
    """

    def __init__(
        self,
        client: KazooClient,
        paths: ZooKeeperPaths,
        storage: HaStorage,
        codec: MessageCodec,
        fenced: FencedCommit | None,
    ) -> None:
        self._client = client
        self._paths = paths
        self._storage = storage
        self._codec = codec
        self._fenced = fenced

    def _commit(self, build: Callable[[TransactionRequest], None]) -> None:
        if self._fenced is None:
            raise HighAvailabilityError("the job graph store is read-only here (not the leader)")
        self._fenced(build)

    def _put(self, job_graph: JobGraph) -> None:
        job_id = job_graph.job_id
        payload = self._storage.path("jobgraphs", f"{job_id}.msgpack")
        self._storage.write(payload, self._codec.encode(job_graph))
        self._client.ensure_path(self._paths.job_graphs)
        node = self._paths.job_graph(job_id)
        exists = self._client.exists(node) is not None
        self._commit(
            lambda t: (
                t.set_data(node, payload.encode()) if exists else t.create(node, payload.encode())
            )
        )
        logger.info("job graph %s stored at %s", job_id, payload)

    def _remove(self, job_id: JobId) -> None:
        node = self._paths.job_graph(job_id)
        try:
            data, _ = self._client.get(node)
        except NoNodeError:
            return
        self._commit(lambda t: t.delete(node))
        self._storage.remove(data.decode())

    def _job_ids(self) -> list[JobId]:
        try:
            return sorted(JobId(c) for c in self._client.get_children(self._paths.job_graphs))
        except NoNodeError:
            return []

    def _recover(self, job_id: JobId) -> JobGraph:
        try:
            data, _ = self._client.get(self._paths.job_graph(job_id))
        except NoNodeError:
            raise HighAvailabilityError(
                f"job {job_id}: no job graph in ZooKeeper", self._paths.job_graph(job_id)
            ) from None
        job_graph = self._codec.decode(self._storage.read(data.decode()))
        if not isinstance(job_graph, JobGraph):
            raise HighAvailabilityError(f"job {job_id}: the stored payload is not a JobGraph")
        return job_graph

    # Public: kazoo's errors become HighAvailabilityError -----------------------------------

    def put(self, job_graph: JobGraph) -> None:
        with zookeeper_errors(f"storing the job graph of {job_graph.job_id}"):
            self._put(job_graph)

    def remove(self, job_id: JobId) -> None:
        with zookeeper_errors(f"removing the job graph of {job_id}"):
            self._remove(job_id)

    def job_ids(self) -> list[JobId]:
        with zookeeper_errors("listing the job graphs"):
            return self._job_ids()

    def recover(self, job_id: JobId) -> JobGraph:
        with zookeeper_errors(f"recovering the job graph of {job_id}"):
            return self._recover(job_id)
