"""What the JobMaster shows of a job beyond its JobDetails: the ExecutionGraphInfo snapshot
(REST's vertices, subtasks, plan, exceptions, configuration and checkpoint details) and the
CheckpointStatistics. Pure functions over the Scheduler's state.

Threading:
    Call them on the JobMaster's main thread (they read its ExecutionGraph); what they return
    is immutable.
"""

from __future__ import annotations

import re

from millrace.config import (
    CheckpointingOptions,
    Configuration,
    ExecutionOptions,
    RuntimeExecutionMode,
)
from millrace.runtime.checkpoint.checkpoint_statistics import CheckpointStatistics
from millrace.runtime.configuration_display import displayed_value
from millrace.runtime.executiongraph import (
    Execution,
    ExecutionGraph,
    ExecutionJobVertex,
    ExecutionState,
    IOMetrics,
)
from millrace.runtime.executiongraph.archived_execution_graph import (
    ArchivedExecution,
    ArchivedExecutionJobVertex,
    ArchivedJobEdge,
    CheckpointConfigInfo,
    ExceptionHistoryEntry,
    ExecutionGraphInfo,
    JobConfigInfo,
)
from millrace.runtime.failover import restart_strategy_from
from millrace.runtime.scheduler.scheduler import Scheduler

__all__ = ["checkpoint_statistics", "exception_name", "execution_graph_info"]

STATE_BACKEND = "keyed state files per key group (Spark state, fsspec storage)"
_ERROR_NAME = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt))\b")


def exception_name(failure: str) -> str:
    """The error type a failure message names (``PipelineError: ...`` -> ``PipelineError``);
    a lost TaskManager is a ``HeartbeatTimeoutError`` (heartbeat) or
    ``RecipientUnreachableError``; anything else a ``TaskFailure``."""
    match = _ERROR_NAME.match(failure.strip())
    if match:
        return match.group(1)
    found = re.search(r"\b([A-Z]\w*(?:Error|Exception))\b", failure)
    if "TaskManager" in failure and " lost (" in failure:
        return "HeartbeatTimeoutError" if "heartbeat" in failure else "RecipientUnreachableError"
    return found.group(1) if found else "TaskFailure"


def endpoint(address: str | None) -> str:
    """``host:port`` of an RPC address (``tcp://host:port/endpoint``; "" for None)."""
    return (address or "").split("://", 1)[-1].split("/", 1)[0]


def _execution(execution: Execution) -> ArchivedExecution:
    return ArchivedExecution(
        execution.vertex.subtask_index,
        execution.state.name,
        execution.attempt_number,
        execution.task_manager_id or "",
        endpoint(execution.task_manager),
        {state.name: ms for state, ms in execution.timestamps.items()},
        IOMetrics(**vars(execution.metrics)),
    )


def _vertex(graph: ExecutionGraph, jv: ExecutionJobVertex) -> ArchivedExecutionJobVertex:
    edges = graph.job_graph.inputs_of(jv.vertex_id)
    return ArchivedExecutionJobVertex(
        jv.vertex_id,
        jv.name,
        jv.parallelism,
        graph.job_graph.max_parallelism,
        tuple(op.name for op in jv.job_vertex.operators),
        tuple(op.kind.name for op in jv.job_vertex.operators),
        tuple(
            ArchivedJobEdge(e.source, e.input_index, e.pattern.value, tuple(e.key_columns))
            for e in edges
        ),
        tuple(_execution(ev.current_execution) for ev in jv.task_vertices),
    )


def _exception(execution: Execution) -> ExceptionHistoryEntry:
    failure = execution.failure or "unknown error"
    return ExceptionHistoryEntry(
        execution.timestamps.get(ExecutionState.FAILED, 0),
        exception_name(failure),
        failure,
        execution.vertex.task_name,
        endpoint(execution.task_manager),
        execution.task_manager_id or "",
    )


def _job_config(configuration: Configuration, job_settings: dict[str, object]) -> JobConfigInfo:
    batch = configuration.get(ExecutionOptions.RUNTIME_MODE) is RuntimeExecutionMode.BATCH
    return JobConfigInfo(
        "BATCH" if batch else "PIPELINED",
        repr(restart_strategy_from(configuration)),
        configuration.get(ExecutionOptions.PARALLELISM),
        {key: displayed_value(key, value) for key, value in sorted(job_settings.items())},
    )


def _checkpoint_config(scheduler: Scheduler, configuration: Configuration) -> CheckpointConfigInfo:
    settings = scheduler.checkpoints.settings
    return CheckpointConfigInfo(
        settings.mode.value,
        round(settings.interval * 1000),
        round(settings.timeout * 1000),
        round(settings.min_pause * 1000),
        settings.max_concurrent,
        settings.num_retained,
        configuration.get(CheckpointingOptions.CHECKPOINTS_DIR),
        STATE_BACKEND,
    )


def execution_graph_info(scheduler: Scheduler, configuration: Configuration) -> ExecutionGraphInfo:
    """The job's ExecutionGraphInfo now (see ``archived_execution_graph.py``).

    Args:
        scheduler: The job's Scheduler.
        configuration: The job's configuration (the cluster's merged with the job's own).
    """
    graph = scheduler.graph
    history = graph.history
    exceptions = tuple(_exception(e) for e in history.failed)
    latest = exceptions[-1] if exceptions else None
    batch = configuration.get(ExecutionOptions.RUNTIME_MODE) is RuntimeExecutionMode.BATCH
    return ExecutionGraphInfo(
        scheduler.details(),
        "BATCH" if batch else "STREAMING",
        {status.name: ms for status, ms in history.job_timestamps.items()},
        tuple(_vertex(graph, jv) for jv in graph.vertices),
        exceptions,
        history.dropped > 0,
        latest.stacktrace if latest else "",
        latest.timestamp_ms if latest else 0,
        _job_config(configuration, dict(graph.job_graph.configuration)),
        _checkpoint_config(scheduler, configuration),
        tuple(scheduler.checkpoints.history()),
        tuple(c.location for c in scheduler.checkpoints.retained()),
        history.now_ms(),
    )


def checkpoint_statistics(scheduler: Scheduler) -> CheckpointStatistics:
    """Counts, the latest checkpoints and their history (REST ``/jobs/{id}/checkpoints``)."""
    coordinator = scheduler.checkpoints
    restored = scheduler.restored_checkpoint
    return CheckpointStatistics(
        round(coordinator.settings.interval * 1000),
        coordinator.settings.mode.value,
        coordinator.counts["completed"],
        coordinator.counts["failed"],
        coordinator.in_progress,
        f"checkpoint {restored}" if restored is not None else "",
        [c.location for c in coordinator.retained()],
        coordinator.history(),
    )
