"""Completed-checkpoint stores (Flink's CompletedCheckpointStore).

A checkpoint is complete only once its store accepted it: with ZooKeeper, one transaction
checks the leader's latch, adds ``jobs/<job-id>/checkpoints/<%019d id>`` (a pointer to the
metadata the checkpoint storage wrote) and drops the pointers beyond the retained ones. A
former leader's transaction fails, so it can neither complete a checkpoint nor, therefore,
commit one. A new leader restores the latest pointer; its checkpoint ids come from the job's
checkpoint id counter (``checkpoint_id_counter``), which every trigger advanced, so they go on
after every id ever handed out, not after the latest completed one. The job's clean-up
(``shutdown``) removes its pointers and its counter.
"""

from __future__ import annotations

import json
import logging
from typing import Protocol

from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import NoNodeError

from millrace.runtime.highavailability.leader_election import Fence
from millrace.runtime.highavailability.zookeeper_client import zookeeper_errors
from millrace.runtime.highavailability.zookeeper_paths import ZooKeeperPaths
from millrace.types import JobId

__all__ = ["CompletedCheckpointStore", "NoCompletedCheckpointStore", "ZooKeeperCheckpointStore"]

logger = logging.getLogger(__name__)


class CompletedCheckpointStore(Protocol):
    """The completed checkpoints of one job that outlive its JobManager.

    Raises:
        HighAvailabilityError: From every method if ZooKeeper fails; LeadershipLostError from
            ``add``/``shutdown`` of a former leader.

    Threading:
        Blocking I/O: an I/O thread, never an endpoint's main thread.
    """

    def add(self, checkpoint_id: int, location: str, retained: int) -> None:
        """Complete checkpoint ``checkpoint_id`` (metadata at ``location``); keep ``retained``."""

    def latest(self) -> tuple[int, str] | None:
        """``(checkpoint id, metadata location)`` of the newest completed one, or None."""

    def shutdown(self) -> None:
        """The job reached a terminal state: drop its pointers and checkpoint id counter."""


class NoCompletedCheckpointStore:
    """No high availability: checkpoints live in the JobMaster's memory only."""

    def add(self, checkpoint_id: int, location: str, retained: int) -> None:
        pass

    def latest(self) -> tuple[int, str] | None:
        return None

    def shutdown(self) -> None:
        pass


class ZooKeeperCheckpointStore:
    """Pointers to completed checkpoints of one job in ZooKeeper.

    Args:
        client: A started kazoo client.
        paths: The cluster's znodes.
        job_id: The job.
        fence: The leadership term the writes belong to.
    """

    def __init__(
        self,
        client: KazooClient,
        paths: ZooKeeperPaths,
        job_id: JobId,
        fence: Fence,
    ) -> None:
        self._client = client
        self._paths = paths
        self._job_id = job_id
        self._fence = fence

    def _ids(self) -> list[int]:
        try:
            children = self._client.get_children(self._paths.checkpoints(self._job_id))
        except NoNodeError:
            return []
        return sorted(int(c) for c in children if c.isdigit())

    def _add(self, checkpoint_id: int, location: str, retained: int) -> None:
        paths, job_id = self._paths, self._job_id
        self._client.ensure_path(paths.checkpoints(job_id))
        others = [i for i in self._ids() if i != checkpoint_id]
        dropped = others[: max(0, len(others) - max(retained - 1, 0))]
        pointer = json.dumps({"checkpoint_id": checkpoint_id, "location": location}).encode()

        def build(t: TransactionRequest) -> None:
            t.create(paths.checkpoint(job_id, checkpoint_id), pointer)
            for old in dropped:
                t.delete(paths.checkpoint(job_id, old))

        self._fence.commit(build)

    def _latest(self) -> tuple[int, str] | None:
        ids = self._ids()
        if not ids:
            return None
        data, _ = self._client.get(self._paths.checkpoint(self._job_id, ids[-1]))
        pointer = json.loads(data)
        return int(pointer["checkpoint_id"]), str(pointer["location"])

    def _shutdown(self) -> None:
        job = self._paths.job(self._job_id)
        if self._client.exists(job) is None:
            return
        nodes = [self._paths.checkpoint(self._job_id, i) for i in self._ids()]
        checkpoints = self._paths.checkpoints(self._job_id)
        has_checkpoints = self._client.exists(checkpoints) is not None  # none completed: none
        counter = self._paths.checkpoint_id_counter(self._job_id)
        has_counter = self._client.exists(counter) is not None

        def build(t: TransactionRequest) -> None:
            for node in nodes:
                t.delete(node)
            if has_checkpoints:
                t.delete(checkpoints)
            if has_counter:
                t.delete(counter)
            t.delete(job)

        self._fence.commit(build)

    # Public: kazoo's errors become HighAvailabilityError -----------------------------------

    def add(self, checkpoint_id: int, location: str, retained: int) -> None:
        what = f"job {self._job_id}: completing checkpoint {checkpoint_id}"
        with self._fence.writing(what), zookeeper_errors(what):
            self._add(checkpoint_id, location, retained)

    def latest(self) -> tuple[int, str] | None:
        with zookeeper_errors(f"job {self._job_id}: reading the latest checkpoint"):
            return self._latest()

    def shutdown(self) -> None:
        what = f"job {self._job_id}: removing its checkpoints"
        with self._fence.writing(what), zookeeper_errors(what):
            self._shutdown()
