"""From a job's ExecutionGraphInfo to the REST API's job bodies (``rest_job_models.py``), as
Flink 1.19 computes them: a vertex's aggregate state and times from its subtasks', a subtask's
start at DEPLOYING and end at its terminal state, the time spent in each state. Times are epoch
ms (-1: not yet), durations ms.

Threading:
    Pure functions: any thread (the REST app's event loop).
"""

from __future__ import annotations

from millrace.runtime.checkpoint.checkpoint_history import CheckpointRecord
from millrace.runtime.dispatcher.rest_job_models import (
    CheckpointDetails,
    JobDetailsFull,
    JobOverview,
    JobPlan,
    JobVertexDetailsFull,
    PlanInput,
    PlanNode,
    SubtaskInfo,
    TaskCheckpointStatistics,
    TaskCounts,
    VertexMetricsFull,
)
from millrace.runtime.executiongraph import ExecutionState, IOMetrics, JobStatus
from millrace.runtime.executiongraph.archived_execution_graph import (
    ArchivedExecution,
    ArchivedExecutionJobVertex,
    ExecutionGraphInfo,
)
from millrace.runtime.job_result import JobDetails, VertexDetails

__all__ = [
    "aggregate_state",
    "checkpoint_details",
    "job_details",
    "job_overview",
    "job_plan",
    "subtask_info",
]

_TERMINAL = ("FINISHED", "CANCELED", "FAILED")
_STATE_ORDER = [s.name for s in ExecutionState]


def metrics(m: IOMetrics) -> VertexMetricsFull:
    """Flink's IOMetrics keys of ``m`` (bytes are not counted: 0)."""
    return VertexMetricsFull(
        read_records=m.records_in,
        write_records=m.records_out,
        dead_letters=m.dead_letters,
        late_records=m.late_records,
        spark_jobs=m.bundles,
        read_bytes=0,
        write_bytes=0,
        accumulated_busy_time=m.busy_ms,
        accumulated_idle_time=m.idle_ms,
        accumulated_backpressured_time=m.backpressured_ms,
    )


def aggregate_state(states: dict[str, int], parallelism: int) -> str:
    """A vertex's state from its subtasks' (Flink's ExecutionJobVertex aggregate state)."""
    for state in ("FAILED", "CANCELING", "CANCELED", "INITIALIZING", "RUNNING"):
        if states.get(state, 0) > 0:
            return state
    if states.get("FINISHED", 0) > 0:
        return "FINISHED" if states["FINISHED"] == parallelism else "RUNNING"
    for state in ("DEPLOYING", "SCHEDULED"):
        if states.get(state, 0) > 0:
            return state
    return "CREATED"


def _times(timestamps: dict[str, int], now: int) -> tuple[int, int, int]:
    start = timestamps.get("DEPLOYING", -1)
    end = max((timestamps[s] for s in _TERMINAL if s in timestamps), default=-1)
    duration = -1 if start < 0 else (end if end >= 0 else now) - start
    return start, end, duration


def subtask_info(subtask: ArchivedExecution, now: int) -> SubtaskInfo:
    """One subtask's current attempt (Flink's SubtaskExecutionAttemptDetailsInfo)."""
    start, end, duration = _times(subtask.timestamps, now)
    reached = sorted(
        subtask.timestamps.items(), key=lambda item: (item[1], _STATE_ORDER.index(item[0]))
    )
    spent = {}
    for (state, at), (_, following) in zip(reached, [*reached[1:], ("", now)], strict=True):
        if state not in _TERMINAL:
            spent[state] = max(0, following - at)
    return SubtaskInfo(
        subtask=subtask.subtask,
        status=subtask.state,
        attempt=subtask.attempt_number,
        endpoint=subtask.endpoint,
        start_time=start,
        end_time=end,
        duration=duration,
        metrics=metrics(subtask.metrics),
        taskmanager_id=subtask.task_manager_id,
        status_duration=spent,
    )


def _vertex(
    details: VertexDetails, vertex: ArchivedExecutionJobVertex | None, now: int
) -> JobVertexDetailsFull:
    starts = [
        s.timestamps["DEPLOYING"]
        for s in (vertex.subtasks if vertex else ())
        if "DEPLOYING" in s.timestamps
    ]
    status = aggregate_state(details.states, details.parallelism)
    ends = [_times(s.timestamps, now)[1] for s in (vertex.subtasks if vertex else ())]
    start = min(starts, default=-1)
    end = max(ends) if ends and status in _TERMINAL and min(ends) >= 0 else -1
    return JobVertexDetailsFull(
        id=vertex.vertex_id if vertex else "",
        name=details.name,
        parallelism=details.parallelism,
        max_parallelism=vertex.max_parallelism if vertex else details.parallelism,
        tasks=details.states,
        status=status,
        start_time=start,
        end_time=end,
        duration=-1 if start < 0 else (end if end >= 0 else now) - start,
        metrics=metrics(details.metrics),
    )


def job_plan(info: ExecutionGraphInfo) -> JobPlan:
    """The job's plan: one node per JobVertex with its inputs' ship strategies."""
    exchange = "blocking" if info.job_type == "BATCH" else "pipelined_bounded"
    return JobPlan(
        jid=info.details.job_id,
        name=info.details.name,
        type=info.job_type,
        nodes=[
            PlanNode(
                id=v.vertex_id,
                parallelism=v.parallelism,
                operator=" -> ".join(v.operator_kinds),
                operator_strategy="",
                description=v.name,
                inputs=[
                    PlanInput(num=i, id=e.source, ship_strategy=e.ship_strategy, exchange=exchange)
                    for i, e in enumerate(v.inputs)
                ],
            )
            for v in info.vertices
        ],
    )


def _span(details: JobDetails) -> tuple[int, int, int]:
    start = round(details.start_time * 1000)
    duration = round(details.duration * 1000)
    end = start + duration if details.status.is_globally_terminal else -1
    return start, end, duration


def job_details(info: ExecutionGraphInfo) -> JobDetailsFull:
    """``GET /jobs/{jobid}``: the fields it always had, and Flink's others."""
    details = info.details
    start, end, duration = _span(details)
    by_name = {v.name: v for v in info.vertices}
    counts = {state.name: 0 for state in ExecutionState}
    for v in details.vertices:
        for state, n in v.states.items():
            counts[state] = counts.get(state, 0) + n
    return JobDetailsFull(
        jid=details.job_id,
        name=details.name,
        state=details.status.name,
        start_time=start,
        end_time=end,
        duration=duration,
        restarts=details.restarts,
        splits_total=details.splits_total,
        splits_assigned=details.splits_assigned,
        is_stoppable=details.status is JobStatus.RUNNING and info.job_type == "STREAMING",
        now=info.now_ms,
        timestamps={status.name: info.timestamps.get(status.name, 0) for status in JobStatus},
        status_counts=counts,
        plan=job_plan(info),
        vertices=[
            _vertex(
                v, info.vertices[i] if i < len(info.vertices) else by_name.get(v.name), info.now_ms
            )
            for i, v in enumerate(details.vertices)
        ],
    )


def job_overview(details: JobDetails, info: ExecutionGraphInfo | None) -> JobOverview:
    """One job of ``GET /jobs/overview`` (its snapshot, where there is one, dates its last
    modification)."""
    start, end, duration = _span(details)
    counts = {state.name.lower(): 0 for state in ExecutionState}
    for v in details.vertices:
        for state, n in v.states.items():
            counts[state.lower()] = counts.get(state.lower(), 0) + n
    changed = [*(info.timestamps.values() if info else ()), start, end]
    for vertex in info.vertices if info else ():
        for subtask in vertex.subtasks:
            changed += subtask.timestamps.values()
    return JobOverview(
        jid=details.job_id,
        name=details.name,
        state=details.status.name,
        start_time=start,
        end_time=end,
        duration=duration,
        last_modification=max(changed),
        tasks=TaskCounts(total=sum(v.parallelism for v in details.vertices), **counts),
    )


def checkpoint_details(record: CheckpointRecord, retained: tuple[str, ...]) -> CheckpointDetails:
    """``GET /jobs/{jobid}/checkpoints/details/{checkpointid}``, with each vertex's
    acknowledgements. A completed checkpoint no longer retained (nor a savepoint) was
    discarded, as was a failed one."""
    discarded = record.status == "FAILED" or (
        record.status == "COMPLETED" and not record.is_savepoint and record.location not in retained
    )
    return CheckpointDetails(
        id=record.checkpoint_id,
        status=record.status,
        is_savepoint=record.is_savepoint,
        trigger_timestamp=record.trigger_ms,
        latest_ack_timestamp=record.latest_ack_ms,
        state_size=record.state_size_bytes,
        end_to_end_duration=record.duration_ms,
        alignment_buffered=0,
        num_subtasks=sum(t.num_subtasks for t in record.tasks),
        num_acknowledged_subtasks=sum(t.num_acknowledged for t in record.tasks),
        external_path=record.location or None,
        discarded=discarded,
        tasks={
            t.vertex_id: TaskCheckpointStatistics(
                id=t.vertex_id,
                status=record.status,
                latest_ack_timestamp=t.latest_ack_ms,
                state_size=t.state_size_bytes,
                end_to_end_duration=t.latest_ack_ms - record.trigger_ms if t.latest_ack_ms else 0,
                num_subtasks=t.num_subtasks,
                num_acknowledged_subtasks=t.num_acknowledged,
            )
            for t in record.tasks
        },
    )
