"""A TaskManager's link to the JobMaster of one job, and the tasks' way to it for checkpoints.

Threading:
    ``JobManagerConnection`` is plain state of the TaskExecutor's main thread; the
    ``RpcCheckpointResponder`` is called on task threads and hands its tells to that thread.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

from millrace.runtime.checkpoint.task_state_snapshot import TaskStateSnapshot
from millrace.runtime.deployment import TaskDeploymentDescriptor
from millrace.runtime.io.input_split import NextInputSplit
from millrace.runtime.jobmaster.job_master_gateway import JobMasterGateway
from millrace.types import ExecutionAttemptId, JobMasterId

__all__ = ["JobManagerConnection", "RpcCheckpointResponder", "request_next_input_split"]


@dataclass
class JobManagerConnection:
    """This TaskManager's link to the JobMaster of one job.

    Attributes:
        job_master_id: The JobMaster's fencing token.
        gateway: The connection being made or made.
        last_heartbeat: Service-clock seconds of the last heartbeat request it sent.
    """

    job_master_id: JobMasterId
    gateway: Future[JobMasterGateway]
    last_heartbeat: float


class RpcCheckpointResponder:
    """A task's CheckpointResponder: AcknowledgeCheckpoint, DeclineCheckpoint and its min clock,
    as tells to its JobMaster.

    Args:
        tell: Runs ``call(gateway)`` on the job's JobMaster from the TaskExecutor's main thread
            (dropped if the TaskExecutor no longer knows the JobMaster).
        attempt_id: The task's attempt.

    Threading:
        Any thread (a task's).
    """

    def __init__(
        self,
        tell: Callable[[Callable[[JobMasterGateway], object]], None],
        attempt_id: ExecutionAttemptId,
    ) -> None:
        self._tell = tell
        self._attempt_id = attempt_id

    def acknowledge_checkpoint(self, checkpoint_id: int, snapshot: TaskStateSnapshot) -> None:
        self._tell(lambda jm: jm.acknowledge_checkpoint(self._attempt_id, checkpoint_id, snapshot))

    def decline_checkpoint(self, checkpoint_id: int, reason: str) -> None:
        self._tell(lambda jm: jm.decline_checkpoint(self._attempt_id, checkpoint_id, reason))

    def report_watermark(self, watermark_ms: int) -> None:
        self._tell(lambda jm: jm.report_watermark(self._attempt_id, watermark_ms))


def request_next_input_split(
    job_master: Future[JobMasterGateway], tdd: TaskDeploymentDescriptor
) -> Future[NextInputSplit]:
    """RequestNextInputSplit for the task of ``tdd`` (its thread; waits for the connection).

    Returns:
        The JobMaster's future of the next split.
    """
    return job_master.result().request_next_input_split(tdd.vertex_id, tdd.attempt_id)
