"""JobGraph stores (Flink's JobGraphStore): the jobs a new leader must recover.

With ZooKeeper, ``jobgraphs/<job-id>`` points to the JobGraph's bytes under the HA storage
directory; without HA the store keeps nothing (jobs live as long as their JobManager).
"""

from __future__ import annotations

import logging
from typing import Protocol

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from millrace.errors import HighAvailabilityError
from millrace.rpc.message_codec import MessageCodec
from millrace.runtime.highavailability.ha_storage import HaStorage
from millrace.runtime.highavailability.leader_election import Fence
from millrace.runtime.highavailability.zookeeper_client import zookeeper_errors
from millrace.runtime.highavailability.zookeeper_paths import ZooKeeperPaths
from millrace.runtime.jobgraph import JobGraph
from millrace.types import JobId, new_id

__all__ = ["JobGraphStore", "NoJobGraphStore", "ZooKeeperJobGraphStore"]

logger = logging.getLogger(__name__)


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
        fence: The leadership term the writes belong to (None: read-only, e.g. a standby).

    A payload is written under a fresh name before its pointer is committed, and the payload
    the pointer named before is removed only after the commit: a former leader's refused put
    changes nothing a successor reads (Flink's ZooKeeperStateHandleStore).
    """

    def __init__(
        self,
        client: KazooClient,
        paths: ZooKeeperPaths,
        storage: HaStorage,
        codec: MessageCodec,
        fence: Fence | None,
    ) -> None:
        self._client = client
        self._paths = paths
        self._storage = storage
        self._codec = codec
        self._fence = fence

    def _writer(self) -> Fence:
        if self._fence is None:
            raise HighAvailabilityError("the job graph store is read-only here (not the leader)")
        return self._fence

    def _put(self, job_graph: JobGraph, fence: Fence) -> None:
        job_id = job_graph.job_id
        payload = self._storage.path("jobgraphs", f"{job_id}-{new_id()[:8]}.msgpack")
        self._storage.write(payload, self._codec.encode(job_graph))
        node = self._paths.job_graph(job_id)
        try:
            self._client.ensure_path(self._paths.job_graphs)
            try:
                former: str | None = self._client.get(node)[0].decode()
            except NoNodeError:
                former = None
            fence.commit(
                lambda t: (
                    t.set_data(node, payload.encode())
                    if former is not None
                    else t.create(node, payload.encode())
                )
            )
        except BaseException:
            self._storage.remove(payload)
            raise
        if former is not None and former != payload:
            self._storage.remove(former)
        logger.info("job graph %s stored at %s", job_id, payload)

    def _remove(self, job_id: JobId, fence: Fence) -> None:
        node = self._paths.job_graph(job_id)
        try:
            data, _ = self._client.get(node)
        except NoNodeError:
            return
        fence.commit(lambda t: t.delete(node))
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
        what = f"storing the job graph of {job_graph.job_id}"
        fence = self._writer()
        with fence.writing(what), zookeeper_errors(what):
            self._put(job_graph, fence)

    def remove(self, job_id: JobId) -> None:
        what = f"removing the job graph of {job_id}"
        fence = self._writer()
        with fence.writing(what), zookeeper_errors(what):
            self._remove(job_id, fence)

    def job_ids(self) -> list[JobId]:
        with zookeeper_errors("listing the job graphs"):
            return self._job_ids()

    def recover(self, job_id: JobId) -> JobGraph:
        with zookeeper_errors(f"recovering the job graph of {job_id}"):
            return self._recover(job_id)
