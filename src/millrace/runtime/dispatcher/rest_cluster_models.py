"""The REST API's TaskManager and JobManager bodies (pydantic), named and shaped as Flink 1.19's:
``/taskmanagers`` entries with hardware and heartbeat age, one TaskManager's slots and tasks,
the JobManager's configuration and log files. Memory in bytes, ages in ms."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from millrace.runtime.dispatcher.rest_models import TaskManagerInfoModel, TaskManagersInfo

__all__ = [
    "ConfigurationEntry",
    "HardwareInfo",
    "LogInfo",
    "LogListInfo",
    "SlotInfo",
    "SlotResource",
    "TaskManagerDetails",
    "TaskManagerEntry",
    "TaskManagerMemory",
    "TaskManagerTask",
    "TaskManagersList",
]


class _Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True)


class HardwareInfo(_Model):
    cpu_cores: int = Field(alias="cpuCores")
    physical_memory: int = Field(alias="physicalMemory", description="bytes; -1: unknown")
    free_memory: int = Field(alias="freeMemory", description="bytes at registration")
    managed_memory: int = Field(alias="managedMemory", description="bytes; 0: none")


class TaskManagerEntry(TaskManagerInfoModel):
    data_port: int = Field(alias="dataPort", description="port data is exchanged on (RPC)")
    time_since_last_heartbeat: int = Field(alias="timeSinceLastHeartbeat", description="ms")
    hardware: HardwareInfo


class TaskManagersList(TaskManagersInfo):
    taskmanagers: list[TaskManagerEntry]  # type: ignore[assignment]  # narrowed: old fields kept


class SlotResource(_Model):
    slot_index: int = Field(alias="slotIndex")
    allocation_id: str = Field(alias="allocationId")


class SlotInfo(_Model):
    job_id: str = Field(alias="jobId")
    resource: SlotResource


class TaskManagerTask(_Model):
    job_id: str = Field(alias="jobId")
    vertex_id: str = Field(alias="vertexId")
    task_name: str = Field(alias="taskName")
    subtask: int
    status: str


class TaskManagerMemory(_Model):
    rss: int = Field(description="resident memory of the process, bytes; -1: unknown")


class TaskManagerDetails(TaskManagerEntry):
    allocated_slots: list[SlotInfo] = Field(alias="allocatedSlots")
    tasks: list[TaskManagerTask] = Field(description="Millrace: the subtasks it runs")
    memory: TaskManagerMemory


class ConfigurationEntry(_Model):
    key: str
    value: str


class LogInfo(_Model):
    name: str
    size: int = Field(description="bytes")
    mtime: int = Field(description="epoch ms of the last write")


class LogListInfo(_Model):
    logs: list[LogInfo]
