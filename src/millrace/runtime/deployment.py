"""Messages that place and run tasks: slot offers, SubmitTask, task state updates.

``TaskDeploymentDescriptor`` is Flink's SubmitTask payload: everything a TaskExecutor needs to
run one subtask, its chained operators included as serialized user code.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from millrace.runtime.checkpoint.task_state_snapshot import TaskStateSnapshot
from millrace.runtime.executiongraph import ExecutionState, IOMetrics
from millrace.runtime.jobgraph import SerializedOperator
from millrace.types import (
    Address,
    AllocationId,
    ExecutionAttemptId,
    JobId,
    JobVertexId,
    ResultPartitionId,
)

__all__ = [
    "Acknowledge",
    "InputChannelDescriptor",
    "SlotOffer",
    "TaskDeploymentDescriptor",
    "TaskExecutionState",
    "TaskOperationResult",
]


@dataclass(frozen=True)
class Acknowledge:
    """Empty positive reply of an ask."""


@dataclass(frozen=True)
class SlotOffer:
    """A TaskManager offers slot ``slot_index`` to a JobMaster under ``allocation_id``."""

    allocation_id: AllocationId
    slot_index: int


@dataclass(frozen=True)
class InputChannelDescriptor:
    """Where a consumer subtask reads one producer subtask's output.

    Attributes:
        partition_id: The producer attempt's result partition.
        subpartition_index: The consumer's subpartition (its subtask index for HASH).
        producer_address: RPC address of the TaskExecutor holding the partition.
        producer_index: The producer's subtask index.
        input_index: The consumer's input the channel belongs to (``JobEdge.input_index``:
            0 or 1 for a two-input operator).
    """

    partition_id: ResultPartitionId
    subpartition_index: int
    producer_address: Address
    producer_index: int
    input_index: int = 0


@dataclass(frozen=True)
class TaskDeploymentDescriptor:
    """Everything needed to run one subtask (Flink's TaskDeploymentDescriptor).

    Attributes:
        job_id, job_name: The job.
        job_master_address: Where the task reports and asks for input splits.
        vertex_id, task_name, subtask_index, parallelism: Which subtask.
        attempt_id: The Execution attempt.
        allocation_id: The slot it runs in.
        invokable: ``module:Class`` of the data-plane task.
        operators: The chained operators (user code, loaded by the task).
        is_source: Whether it reads input splits.
        output_partition: Result partition it produces, or None for a sink-only chain.
        num_subpartitions: Consumer subtasks of the output partition.
        input_channels: One channel per producer subtask of every input edge.
        max_parallelism: Number of key groups.
        configuration: The job's configuration as key -> value strings.
        restore: State to restore (from a checkpoint or savepoint), or None.
    """

    job_id: JobId
    job_name: str
    job_master_address: Address
    vertex_id: JobVertexId
    task_name: str
    subtask_index: int
    parallelism: int
    attempt_id: ExecutionAttemptId
    allocation_id: AllocationId
    invokable: str
    operators: tuple[SerializedOperator, ...]
    is_source: bool
    output_partition: ResultPartitionId | None
    num_subpartitions: int
    input_channels: tuple[InputChannelDescriptor, ...]
    max_parallelism: int
    configuration: dict[str, object] = field(default_factory=dict)
    restore: TaskStateSnapshot | None = None


@dataclass(frozen=True)
class TaskOperationResult:
    """Reply to SubmitTask / CancelTask: whether the TaskExecutor did it, and why not."""

    attempt_id: ExecutionAttemptId
    success: bool
    description: str = ""


@dataclass(frozen=True)
class TaskExecutionState:
    """UpdateTaskExecutionState: a task changed state (seed 000).

    Attributes:
        job_id: The job.
        attempt_id: The Execution attempt.
        state: Its new state.
        metrics: Counters so far (final when the state is terminal).
        error: Root cause text when FAILED.
    """

    job_id: JobId
    attempt_id: ExecutionAttemptId
    state: ExecutionState
    metrics: IOMetrics | None = None
    error: str | None = None
