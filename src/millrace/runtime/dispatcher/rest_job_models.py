"""The REST API's job bodies beyond ``rest_models.py`` (pydantic), named and shaped as Flink
1.19's: job overview, job details with its plan, vertex and subtask details, exceptions, job and
checkpoint configuration, checkpoint details, stop with savepoint. Times are epoch ms (-1: not
yet), durations ms."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from millrace.runtime.dispatcher.rest_models import JobDetailsInfo, JobVertexDetails, VertexMetrics

__all__ = [
    "CheckpointConfig",
    "CheckpointDetails",
    "ErrorResponse",
    "ExceptionHistory",
    "ExceptionHistoryEntryInfo",
    "ExecutionConfigInfo",
    "ExternalizationInfo",
    "JobConfig",
    "JobDetailsFull",
    "JobExceptions",
    "JobOverview",
    "JobPlan",
    "JobPlanInfo",
    "JobVertexDetailsFull",
    "MultipleJobsDetails",
    "PlanInput",
    "PlanNode",
    "StopWithSavepointRequest",
    "SubtaskInfo",
    "SubtasksInfo",
    "TaskCheckpointStatistics",
    "TaskCounts",
    "VertexMetricsFull",
    "VertexSubtasksDetails",
]


class _Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True)


class ErrorResponse(_Model):
    errors: list[str]


class TaskCounts(_Model):
    """Subtasks per ExecutionState, lower case (Flink's job overview "tasks"; Millrace has no
    RECONCILING: 0)."""

    total: int = 0
    created: int = 0
    scheduled: int = 0
    deploying: int = 0
    running: int = 0
    finished: int = 0
    canceling: int = 0
    canceled: int = 0
    failed: int = 0
    initializing: int = 0
    reconciling: int = 0


class JobOverview(_Model):
    jid: str
    name: str
    state: str
    start_time: int = Field(alias="start-time")
    end_time: int = Field(alias="end-time", description="-1 while running")
    duration: int
    last_modification: int = Field(alias="last-modification")
    tasks: TaskCounts


class MultipleJobsDetails(_Model):
    jobs: list[JobOverview]


class VertexMetricsFull(VertexMetrics):
    """Flink's IOMetrics keys: counted records, bytes (0: Millrace does not count them) and
    the accumulated busy, idle and backpressured ms of the subtasks."""

    read_bytes: int = Field(alias="read-bytes", description="0: not counted")
    write_bytes: int = Field(alias="write-bytes", description="0: not counted")
    accumulated_busy_time: int = Field(alias="accumulated-busy-time", description="ms")
    accumulated_idle_time: int = Field(alias="accumulated-idle-time", description="ms")
    accumulated_backpressured_time: int = Field(
        alias="accumulated-backpressured-time", description="ms"
    )


class PlanInput(_Model):
    num: int
    id: str = Field(description="the producing JobVertexId")
    ship_strategy: str = Field(description="FORWARD, HASH or REBALANCE")
    exchange: str = Field(description="pipelined_bounded (STREAMING) or blocking (BATCH)")


class PlanNode(_Model):
    id: str
    parallelism: int
    operator: str
    operator_strategy: str
    description: str
    inputs: list[PlanInput] = Field(default_factory=list)
    optimizer_properties: dict[str, Any] = Field(default_factory=dict)


class JobPlan(_Model):
    jid: str
    name: str
    type: str = Field(description="STREAMING or BATCH")
    nodes: list[PlanNode]


class JobPlanInfo(_Model):
    plan: JobPlan


class JobVertexDetailsFull(JobVertexDetails):
    id: str
    status: str = Field(description="the vertex's aggregate ExecutionState")
    start_time: int = Field(alias="start-time")
    end_time: int = Field(alias="end-time")
    duration: int
    max_parallelism: int = Field(alias="maxParallelism")
    metrics: VertexMetricsFull


class JobDetailsFull(JobDetailsInfo):
    is_stoppable: bool = Field(alias="isStoppable")
    now: int
    timestamps: dict[str, int] = Field(description="JobStatus -> epoch ms reached (0: not)")
    status_counts: dict[str, int] = Field(alias="status-counts")
    plan: JobPlan
    vertices: list[JobVertexDetailsFull]  # type: ignore[assignment]  # narrowed: old fields kept


class SubtaskInfo(_Model):
    subtask: int
    status: str
    attempt: int
    endpoint: str = Field(description="host:port of its TaskManager")
    start_time: int = Field(alias="start-time")
    end_time: int = Field(alias="end-time")
    duration: int
    metrics: VertexMetricsFull
    taskmanager_id: str = Field(alias="taskmanager-id")
    status_duration: dict[str, int] = Field(
        alias="status-duration", description="ExecutionState -> ms spent in it"
    )


class VertexSubtasksDetails(_Model):
    id: str
    name: str
    parallelism: int
    max_parallelism: int = Field(alias="maxParallelism")
    now: int
    subtasks: list[SubtaskInfo]


class SubtasksInfo(_Model):
    subtasks: list[SubtaskInfo]


class ExceptionHistoryEntryInfo(_Model):
    exception_name: str = Field(alias="exceptionName")
    stacktrace: str
    timestamp: int
    task_name: str | None = Field(alias="taskName")
    endpoint: str | None
    task_manager_id: str | None = Field(alias="taskManagerId")
    failure_labels: dict[str, str] = Field(alias="failureLabels", default_factory=dict)
    concurrent_exceptions: list[dict[str, Any]] = Field(
        alias="concurrentExceptions", default_factory=list
    )


class ExceptionHistory(_Model):
    entries: list[ExceptionHistoryEntryInfo]
    truncated: bool


class JobExceptions(_Model):
    root_exception: str | None = Field(alias="root-exception")
    timestamp: int | None
    all_exceptions: list[dict[str, Any]] = Field(alias="all-exceptions", default_factory=list)
    truncated: bool
    exception_history: ExceptionHistory = Field(alias="exceptionHistory")


class ExecutionConfigInfo(_Model):
    execution_mode: str = Field(alias="execution-mode")
    restart_strategy: str = Field(alias="restart-strategy")
    job_parallelism: int = Field(alias="job-parallelism")
    object_reuse_mode: bool = Field(alias="object-reuse-mode")
    user_config: dict[str, str] = Field(alias="user-config")


class JobConfig(_Model):
    jid: str
    name: str
    execution_config: ExecutionConfigInfo = Field(alias="execution-config")


class ExternalizationInfo(_Model):
    enabled: bool
    delete_on_cancellation: bool


class CheckpointConfig(_Model):
    mode: str
    interval: int = Field(description="ms; 0: periodic checkpoints off")
    timeout: int
    min_pause: int
    max_concurrent: int
    externalization: ExternalizationInfo
    state_backend: str
    checkpoint_storage: str
    unaligned_checkpoints: bool
    tolerable_failed_checkpoints: int


class TaskCheckpointStatistics(_Model):
    id: str
    status: str
    latest_ack_timestamp: int
    state_size: int
    end_to_end_duration: int
    num_subtasks: int
    num_acknowledged_subtasks: int


class CheckpointDetails(_Model):
    id: int
    status: str
    is_savepoint: bool
    trigger_timestamp: int
    latest_ack_timestamp: int
    state_size: int
    end_to_end_duration: int
    alignment_buffered: int
    num_subtasks: int
    num_acknowledged_subtasks: int
    external_path: str | None
    discarded: bool
    tasks: dict[str, TaskCheckpointStatistics]


class StopWithSavepointRequest(_Model):
    target_directory: str | None = Field(default=None, alias="targetDirectory")
    drain: bool = False
