"""The REST API's response and request bodies (pydantic), named and shaped as Flink's."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "CheckpointInfo",
    "CheckpointingStatistics",
    "JobDetailsInfo",
    "JobIdWithStatus",
    "JobIdsWithStatus",
    "JobSubmitResponse",
    "JobVertexDetails",
    "JobWatermarks",
    "Overview",
    "SavepointRequest",
    "SavepointStatus",
    "TaskManagerInfoModel",
    "TaskManagersInfo",
    "TaskWatermark",
    "TriggerResponse",
    "VertexMetrics",
]


class _Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True)


class Overview(_Model):
    taskmanagers: int
    slots_total: int = Field(alias="slots-total")
    slots_available: int = Field(alias="slots-available")
    jobs_running: int = Field(alias="jobs-running")
    jobs_finished: int = Field(alias="jobs-finished")
    jobs_cancelled: int = Field(alias="jobs-cancelled")
    jobs_failed: int = Field(alias="jobs-failed")
    millrace_version: str = Field(alias="millrace-version")


class JobIdWithStatus(_Model):
    id: str
    status: str


class JobIdsWithStatus(_Model):
    jobs: list[JobIdWithStatus]


class VertexMetrics(_Model):
    read_records: int = Field(alias="read-records")
    write_records: int = Field(alias="write-records")
    dead_letters: int = Field(alias="dead-letters")
    late_records: int = Field(alias="late-records")
    spark_jobs: int = Field(alias="spark-jobs")


class JobVertexDetails(_Model):
    name: str
    parallelism: int
    tasks: dict[str, int] = Field(description="ExecutionState -> number of subtasks in it")
    metrics: VertexMetrics


class JobDetailsInfo(_Model):
    jid: str
    name: str
    state: str
    start_time: int = Field(alias="start-time", description="epoch ms")
    end_time: int = Field(alias="end-time", description="epoch ms, -1 while running")
    duration: int = Field(description="ms")
    restarts: int
    splits_total: int = Field(alias="splits-total")
    splits_assigned: int = Field(alias="splits-assigned")
    vertices: list[JobVertexDetails]


class TaskManagerInfoModel(_Model):
    id: str
    path: str = Field(description="RPC address of its TaskExecutor")
    slots_number: int = Field(alias="slotsNumber")
    free_slots: int = Field(alias="freeSlots")


class TaskManagersInfo(_Model):
    taskmanagers: list[TaskManagerInfoModel]


class JobSubmitResponse(_Model):
    jobid: str
    job_url: str = Field(alias="jobUrl")


class CheckpointInfo(_Model):
    id: int
    status: str = Field(description="IN_PROGRESS, COMPLETED or FAILED")
    is_savepoint: bool = Field(alias="is_savepoint")
    trigger_timestamp: int = Field(alias="trigger_timestamp", description="epoch ms")
    end_to_end_duration: int = Field(alias="end_to_end_duration", description="ms")
    state_size: int = Field(alias="state_size", description="bytes")
    external_path: str = Field(alias="external_path")
    failure_message: str = Field(alias="failure_message")


class CheckpointingStatistics(_Model):
    counts: dict[str, int] = Field(description="completed, failed, in_progress")
    interval: int = Field(description="ms between periodic checkpoints, 0: off")
    mode: str
    restored: str = Field(description="what the job last restored, if anything")
    retained: list[str] = Field(description="locations of the completed checkpoints kept")
    latest: CheckpointInfo | None = Field(description="the newest completed checkpoint")
    history: list[CheckpointInfo]


class SavepointRequest(_Model):
    target_directory: str | None = Field(default=None, alias="target-directory")
    cancel_job: bool = Field(default=False, alias="cancel-job")


class TriggerResponse(_Model):
    request_id: str = Field(alias="request-id")


class SavepointStatus(_Model):
    status: str = Field(description="IN_PROGRESS or COMPLETED")
    location: str | None = None
    failure_cause: str | None = Field(default=None, alias="failure-cause")


class TaskWatermark(_Model):
    vertex: str
    subtask: int
    watermark: int = Field(description="epoch ms; MIN before any, MAX when idle or done")


class JobWatermarks(_Model):
    min_clock: int = Field(alias="min-clock", description="the global min clock, epoch ms")
    tasks: list[TaskWatermark]
