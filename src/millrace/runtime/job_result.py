"""What a finished job reports (JobResultSuccess / JobResultFailure) and what a running job
shows (JobDetails)."""

from __future__ import annotations

from dataclasses import dataclass, field

from millrace.runtime.executiongraph import IOMetrics, JobStatus
from millrace.types import JobId

__all__ = [
    "JobDetails",
    "JobResult",
    "JobResultFailure",
    "JobResultSuccess",
    "VertexDetails",
]


@dataclass(frozen=True)
class VertexDetails:
    """One JobVertex of a job, as reported to clients.

    Attributes:
        name: Chain name.
        parallelism: Subtasks.
        states: ExecutionState name -> number of subtasks in it.
        metrics: Summed counters of the subtasks (final once they finished).
    """

    name: str
    parallelism: int
    states: dict[str, int]
    metrics: IOMetrics


@dataclass(frozen=True)
class JobDetails:
    """A job's status and progress.

    Attributes:
        job_id, name, status: The job.
        start_time: Submission time, epoch seconds.
        duration: Seconds since submission, or until the end.
        vertices: Per JobVertex details, in topological order.
        splits_total, splits_assigned: Input splits of the sources.
        restarts: How often the job restarted after failures.
        checkpoints: Checkpoints (and savepoints) completed.
    """

    job_id: JobId
    name: str
    status: JobStatus
    start_time: float
    duration: float
    vertices: list[VertexDetails] = field(default_factory=list)
    splits_total: int = 0
    splits_assigned: int = 0
    restarts: int = 0
    checkpoints: int = 0


@dataclass(frozen=True)
class JobResultSuccess:
    """SubmitJobWait's reply for a job that FINISHED.

    Attributes:
        job_id: The job.
        duration: Wall time from submission to the end, seconds.
        accumulators: Vertex name -> summed IOMetrics (records in/out per vertex).
        details: The final JobDetails.
    """

    job_id: JobId
    duration: float
    accumulators: dict[str, IOMetrics]
    details: JobDetails


@dataclass(frozen=True)
class JobResultFailure:
    """A job that ended FAILED or CANCELED, with the root cause."""

    job_id: JobId
    status: JobStatus
    duration: float
    root_cause: str
    details: JobDetails


JobResult = JobResultSuccess | JobResultFailure
