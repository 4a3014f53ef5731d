"""What the Scheduler shows of a job: its details (REST, CLI), its result, and the tasks a
checkpoint waits for. Pure functions over the Scheduler's state.

Threading:
    Call them on the JobMaster's main thread (they read its ExecutionGraph).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from concurrent.futures import Future

from millrace.runtime.checkpoint.pending_checkpoint import CheckpointTarget
from millrace.runtime.deployment import TaskOperationResult
from millrace.runtime.executiongraph import Execution, ExecutionGraph, ExecutionState, JobStatus
from millrace.runtime.job_result import (
    JobDetails,
    JobResult,
    JobResultFailure,
    JobResultSuccess,
    VertexDetails,
)
from millrace.runtime.source.source_coordinator import SourceCoordinator
from millrace.runtime.taskexecutor.task_executor_gateway import TaskExecutorGateway
from millrace.types import ExecutionAttemptId

__all__ = ["checkpoint_targets", "job_details", "job_result"]


def job_details(
    graph: ExecutionGraph,
    sources: Iterable[SourceCoordinator],
    started: float,
    ended: float,
    restarts: int,
    checkpoints: int,
) -> JobDetails:
    """The job as the Dispatcher, REST and the CLI show it (times in epoch seconds)."""
    vertices = [
        VertexDetails(
            jv.name, jv.parallelism, {s.name: n for s, n in jv.state_counts().items()}, jv.metrics()
        )
        for jv in graph.vertices
    ]
    listed = list(sources)
    return JobDetails(
        graph.job_id,
        graph.job_graph.name,
        graph.status,
        started,
        ended - started,
        vertices,
        sum(s.splits_total for s in listed),
        sum(s.splits_assigned for s in listed),
        restarts,
        checkpoints,
    )


def job_result(graph: ExecutionGraph, details: JobDetails, failure: str | None) -> JobResult:
    """The result of a job in a terminal status: its accumulators if FINISHED, else its
    status and root cause."""
    if graph.status is JobStatus.FINISHED:
        accumulators = {jv.name: jv.metrics() for jv in graph.vertices}
        return JobResultSuccess(graph.job_id, details.duration, accumulators, details)
    return JobResultFailure(
        graph.job_id, graph.status, details.duration, failure or "unknown", details
    )


def checkpoint_targets(
    graph: ExecutionGraph, gateway_of: Callable[[Execution], TaskExecutorGateway | None]
) -> list[CheckpointTarget] | None:
    """Every Execution a checkpoint waits for, the sources with their trigger; None unless
    every Execution RUNS (no checkpoint can start then)."""
    targets = []
    for jv in graph.vertices:
        for ev in jv.task_vertices:
            execution = ev.current_execution
            if execution.state is not ExecutionState.RUNNING:
                return None
            trigger = None
            if jv.job_vertex.is_source:
                gateway = gateway_of(execution)
                if gateway is None:
                    return None
                trigger = functools.partial(_trigger, gateway, execution.attempt_id)
            targets.append(
                CheckpointTarget(execution.attempt_id, jv.vertex_id, ev.subtask_index, trigger)
            )
    return targets


def _trigger(
    gateway: TaskExecutorGateway,
    attempt_id: ExecutionAttemptId,
    checkpoint_id: int,
    timestamp_ms: int,
) -> Future[TaskOperationResult]:
    return gateway.trigger_checkpoint(attempt_id, checkpoint_id, timestamp_ms)
