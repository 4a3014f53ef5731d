"""HighAvailabilityCheckpointStorage: checkpoint storage of a JobMaster under high availability.

A checkpoint whose metadata is written is complete only once the completed-checkpoint store
took its pointer, in a transaction fenced by the leader's latch (seed 003, 004): a former
leader's checkpoint fails instead (the coordinator aborts it) and is therefore never committed.
Checkpoints are discarded only while this term leads and is not suspended, so a former leader
never deletes the checkpoint its successor restores.
"""

from __future__ import annotations

import logging

from millrace.errors import HighAvailabilityError
from millrace.runtime.checkpoint.checkpoint_storage import CheckpointMetadata, CheckpointStorage
from millrace.runtime.highavailability.high_availability_services import LeaderServices
from millrace.types import JobId

__all__ = ["HighAvailabilityCheckpointStorage"]

logger = logging.getLogger(__name__)


class HighAvailabilityCheckpointStorage(CheckpointStorage):
    """CheckpointStorage whose written checkpoints enter the job's completed-checkpoint store.

    Args:
        checkpoints_dir: ``state.checkpoints.dir``.
        savepoints_dir: ``state.savepoints.dir``.
        job_id: The job.
        leader: The leadership term's services.
        retained: ``state.checkpoints.num-retained`` (pointers kept in the store).

    Raises:
        HighAvailabilityError: From ``write``, if the store refused the checkpoint
            (LeadershipLostError for a former leader).

    Threading:
        Any thread; blocking I/O (the JobMaster's I/O executor).
    """

    def __init__(
        self,
        checkpoints_dir: str,
        savepoints_dir: str,
        job_id: JobId,
        leader: LeaderServices,
        retained: int,
    ) -> None:
        super().__init__(checkpoints_dir, savepoints_dir)
        self._store = leader.checkpoint_store(job_id)
        self._leader = leader
        self._retained = retained
        self.suspended = False

    def write(self, metadata: CheckpointMetadata, directory: str) -> CheckpointMetadata:
        written = super().write(metadata, directory)
        if not written.is_savepoint:
            self._store.add(written.checkpoint_id, written.location, self._retained)
        return written

    def _leading(self, what: str) -> bool:
        if self.suspended:
            logger.info("not discarding %s: the JobMaster is suspended", what)
            return False
        try:
            self._leader.check_leadership()
        except HighAvailabilityError as error:
            logger.info("not discarding %s: %s", what, error)
            return False
        return True

    def discard(self, metadata: CheckpointMetadata) -> None:
        if self._leading(metadata.location):
            super().discard(metadata)

    def discard_directory(self, directory: str) -> None:
        if self._leading(directory):
            super().discard_directory(directory)
