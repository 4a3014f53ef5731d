"""ExecutionGraphInfo: an immutable snapshot of a job's ExecutionGraph for REST (Flink's
ArchivedExecutionGraph with its exception history, ``ExecutionGraphInfo``).

The JobMaster builds one on its main thread (``scheduler/execution_graph_views.py``) and hands
it out through its gateway; the Dispatcher keeps the last one of every ended job. Every class
is a frozen dataclass of plain fields registered with the control-message codec, so a snapshot
can cross processes. Times are epoch ms, durations ms.

Threading:
    Immutable: any thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from millrace.runtime.checkpoint.checkpoint_history import CheckpointRecord
from millrace.runtime.executiongraph.execution_graph import IOMetrics
from millrace.runtime.job_result import JobDetails

__all__ = [
    "ArchivedExecution",
    "ArchivedExecutionJobVertex",
    "ArchivedJobEdge",
    "CheckpointConfigInfo",
    "ExceptionHistoryEntry",
    "ExecutionGraphInfo",
    "JobConfigInfo",
]


@dataclass(frozen=True)
class ArchivedExecution:
    """The current attempt of one subtask.

    Attributes:
        subtask: Subtask index (0-based).
        state: ExecutionState name.
        attempt_number: 0 for the first attempt, +1 per restart of the subtask.
        task_manager_id: ResourceId of the TaskManager running it ("" before DEPLOYING).
        endpoint: ``host:port`` of that TaskManager's TaskExecutor ("" before DEPLOYING).
        timestamps: ExecutionState name -> epoch ms it was reached.
        metrics: The counters the task reported.
    """

    subtask: int
    state: str
    attempt_number: int
    task_manager_id: str
    endpoint: str
    timestamps: dict[str, int]
    metrics: IOMetrics


@dataclass(frozen=True)
class ArchivedJobEdge:
    """One input of a JobVertex (Flink's plan input).

    Attributes:
        source: Producing JobVertexId.
        input_index: Which input of the consumer it feeds (0 = first, 1 = second).
        ship_strategy: FORWARD, HASH or REBALANCE (Millrace's DistributionPattern).
        key_columns: Key columns of a HASH exchange.
    """

    source: str
    input_index: int
    ship_strategy: str
    key_columns: tuple[str, ...] = ()


@dataclass(frozen=True)
class ArchivedExecutionJobVertex:
    """One JobVertex with its subtasks.

    Attributes:
        vertex_id: The JobVertexId.
        name: Chain name.
        parallelism: Subtasks.
        max_parallelism: The job's max parallelism (key groups).
        operators: Names of the chained operators, in order.
        operator_kinds: Their OperatorKind names.
        inputs: Its inputs in the JobGraph.
        subtasks: Its subtasks' current attempts, by index.
    """

    vertex_id: str
    name: str
    parallelism: int
    max_parallelism: int
    operators: tuple[str, ...]
    operator_kinds: tuple[str, ...]
    inputs: tuple[ArchivedJobEdge, ...]
    subtasks: tuple[ArchivedExecution, ...]


@dataclass(frozen=True)
class ExceptionHistoryEntry:
    """One failed task (Flink's exception history entry).

    Attributes:
        timestamp_ms: When the Execution FAILED, epoch ms.
        exception_name: The error's type name (see ``docs/rest_api.md``).
        stacktrace: The failure as reported (message, with the traceback where the task sent
            one).
        task_name: ``vertex (i/n)``.
        endpoint: ``host:port`` of its TaskManager ("" if it was not deployed).
        task_manager_id: ResourceId of its TaskManager ("" if it was not deployed).
    """

    timestamp_ms: int
    exception_name: str
    stacktrace: str
    task_name: str
    endpoint: str
    task_manager_id: str


@dataclass(frozen=True)
class JobConfigInfo:
    """The job's execution configuration (Flink's ExecutionConfig as REST shows it).

    Attributes:
        execution_mode: PIPELINED (STREAMING) or BATCH.
        restart_strategy: The restart strategy, described.
        job_parallelism: ``parallelism.default`` of the job.
        user_config: The job's own settings (secrets masked), as strings.
    """

    execution_mode: str
    restart_strategy: str
    job_parallelism: int
    user_config: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CheckpointConfigInfo:
    """The job's checkpointing settings (Flink's CheckpointConfigInfo).

    Attributes:
        mode: EXACTLY_ONCE or AT_LEAST_ONCE.
        interval_ms: Between periodic checkpoints (0: off).
        timeout_ms: Before a pending checkpoint is aborted.
        min_pause_ms: Between the end of a checkpoint and the next.
        max_concurrent: Checkpoints in flight at once.
        num_retained: Completed checkpoints kept.
        checkpoint_storage: ``state.checkpoints.dir``.
        state_backend: How keyed state is kept.
    """

    mode: str
    interval_ms: int
    timeout_ms: int
    min_pause_ms: int
    max_concurrent: int
    num_retained: int
    checkpoint_storage: str
    state_backend: str


@dataclass(frozen=True)
class ExecutionGraphInfo:
    """A job as REST shows it: the ArchivedExecutionGraph and its exception history.

    Attributes:
        details: The JobDetails (status, counts, splits, restarts).
        job_type: STREAMING or BATCH (the resolved ``execution.runtime-mode``).
        timestamps: JobStatus name -> epoch ms it was reached.
        vertices: The JobVertices in topological order.
        exceptions: The last failed tasks, oldest first.
        exceptions_truncated: Whether older failures were dropped.
        root_exception: The job's failure cause, else the latest task failure, else "".
        root_timestamp_ms: When that happened (0: nothing failed).
        job_config: The execution configuration.
        checkpoint_config: The checkpointing settings.
        checkpoints: The newest checkpoints, oldest first, with per-vertex acknowledgements.
        retained: Locations of the completed checkpoints kept (others were discarded).
        now_ms: When the snapshot was taken.
    """

    details: JobDetails
    job_type: str
    timestamps: dict[str, int]
    vertices: tuple[ArchivedExecutionJobVertex, ...]
    exceptions: tuple[ExceptionHistoryEntry, ...]
    exceptions_truncated: bool
    root_exception: str
    root_timestamp_ms: int
    job_config: JobConfigInfo
    checkpoint_config: CheckpointConfigInfo
    checkpoints: tuple[CheckpointRecord, ...]
    retained: tuple[str, ...]
    now_ms: int
