"""SchedulerContext: what the Scheduler needs from the JobMaster in front of it."""

from __future__ import annotations

from typing import Protocol

from millrace.runtime.job_result import JobResult
from millrace.types import ResourceId

__all__ = ["SchedulerContext"]


class SchedulerContext(Protocol):
    """What the Scheduler needs from its JobMaster (main thread)."""

    def request_slots(self) -> None:
        """Request the slots the job lacks; ``Scheduler.slots_ready`` follows once it holds
        all of them (at once if it does)."""
        ...

    def release_task_manager(self, resource_id: ResourceId, cause: str) -> None:
        """Drop a TaskManager that cannot be reached (its slots leave the job); the
        JobMaster then reports the loss with ``Scheduler.task_manager_lost``."""
        ...

    def job_terminated(self, result: JobResult) -> None:
        """The job reached a terminal status: free its slots and publish ``result``."""
        ...
