"""The Dispatcher's ExecutionGraphInfo of an ended job (Flink's ExecutionGraphInfoStore, in
memory): the JobMaster's last snapshot completed with the job's result, or, for a job whose
result was recovered from the JobResultStore (high availability), one made of its JobDetails.

Threading:
    Pure functions: any thread (the Dispatcher calls them on its main thread).
"""

from __future__ import annotations

import dataclasses

from millrace.runtime.executiongraph.archived_execution_graph import (
    CheckpointConfigInfo,
    ExecutionGraphInfo,
    JobConfigInfo,
)
from millrace.runtime.job_result import JobResult, JobResultFailure

__all__ = ["archived_from_details", "archived_with_result"]


def archived_with_result(info: ExecutionGraphInfo, result: JobResult) -> ExecutionGraphInfo:
    """``info`` with the final JobDetails and, for a failed or cancelled job, its root cause
    as the root exception."""
    info = dataclasses.replace(info, details=result.details)
    if isinstance(result, JobResultFailure) and result.root_cause:
        ended = info.timestamps.get(result.status.name, info.root_timestamp_ms)
        info = dataclasses.replace(info, root_exception=result.root_cause, root_timestamp_ms=ended)
    return info


def archived_from_details(result: JobResult) -> ExecutionGraphInfo:
    """A snapshot holding only what the result keeps: the JobDetails (no subtasks, plan,
    exceptions or checkpoints; the vertices are shown from the JobDetails)."""
    details = result.details
    start_ms = round(details.start_time * 1000)
    end_ms = start_ms + round(details.duration * 1000)
    failure = result.root_cause if isinstance(result, JobResultFailure) else ""
    return ExecutionGraphInfo(
        details,
        "STREAMING",
        {"CREATED": start_ms, details.status.name: end_ms},
        (),
        (),
        False,
        failure,
        end_ms if failure else 0,
        JobConfigInfo("PIPELINED", "", 0),
        CheckpointConfigInfo("", 0, 0, 0, 0, 0, "", ""),
        (),
        (),
        end_ms,
    )
