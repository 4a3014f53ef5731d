"""The znode tree of one cluster (Flink's layout since 1.15, one leader election per process).

::

    <path.root>/<cluster-id>/
        leader/latch/                         ephemeral sequential contenders (lowest leads)
        leader/<component>/connection_info    ephemeral: {"address", "leader_session_id"}
                                              (dispatcher, resource_manager, rest_server,
                                              <job-id> for each job's JobMaster)
        jobgraphs/<job-id>                    pointer to the JobGraph under the storage dir
        jobs/<job-id>/checkpoints/<%019d id>  pointer to a completed checkpoint's metadata
        jobs/<job-id>/checkpoint_id_counter   the next checkpoint id
"""

from __future__ import annotations

from dataclasses import dataclass

from millrace.config import Configuration, HighAvailabilityOptions
from millrace.types import JobId

__all__ = ["DISPATCHER", "RESOURCE_MANAGER", "REST_SERVER", "ZooKeeperPaths"]

DISPATCHER = "dispatcher"
RESOURCE_MANAGER = "resource_manager"
REST_SERVER = "rest_server"


@dataclass(frozen=True)
class ZooKeeperPaths:
    """Absolute znode paths of one cluster.

    Args:
        base: ``<path.root>/<cluster-id>``, normalized (one leading ``/``, none trailing).
    """

    base: str

    @classmethod
    def from_configuration(cls, configuration: Configuration) -> ZooKeeperPaths:
        root = configuration.get(HighAvailabilityOptions.ZOOKEEPER_ROOT).strip("/")
        cluster = configuration.get(HighAvailabilityOptions.CLUSTER_ID).strip("/")
        return cls(f"/{root}/{cluster}")

    @property
    def latch(self) -> str:
        return f"{self.base}/leader/latch"

    def connection_info(self, component: str) -> str:
        """``leader/<component>/connection_info`` (a component name or a job id)."""
        return f"{self.base}/leader/{component}/connection_info"

    @property
    def job_graphs(self) -> str:
        return f"{self.base}/jobgraphs"

    def job_graph(self, job_id: JobId) -> str:
        return f"{self.job_graphs}/{job_id}"

    def checkpoints(self, job_id: JobId) -> str:
        return f"{self.base}/jobs/{job_id}/checkpoints"

    def checkpoint(self, job_id: JobId, checkpoint_id: int) -> str:
        return f"{self.checkpoints(job_id)}/{checkpoint_id:019d}"

    def checkpoint_id_counter(self, job_id: JobId) -> str:
        return f"{self.base}/jobs/{job_id}/checkpoint_id_counter"

    def job(self, job_id: JobId) -> str:
        return f"{self.base}/jobs/{job_id}"
