"""Flink's metric names and the values behind them, shared by the Prometheus reporter and the
REST metric paths (so both show one figure under one name).

Names are Flink's metric identifiers within their scope (``numRecordsIn``,
``Status.JVM.Memory.Heap.Used``); the Prometheus reporter joins scope and name with ``_`` and
prefixes ``flink_`` (``flink_taskmanager_job_task_numRecordsIn``), as Flink's does.
"""

from __future__ import annotations

from millrace.runtime.checkpoint.checkpoint_statistics import CheckpointStatistics
from millrace.runtime.executiongraph import JobStatus
from millrace.runtime.job_result import JobDetails
from millrace.runtime.metrics.process_metrics import ProcessMetrics
from millrace.runtime.metrics.task_io_metric_group import TaskMetricsSnapshot
from millrace.runtime.resourcemanager.slot_manager import TaskManagerInfo

__all__ = [
    "TASK_METRICS",
    "job_manager_values",
    "job_values",
    "process_values",
    "task_values",
]

# Task scope (flink_taskmanager_job_task_*): Flink's name -> what it is.
TASK_METRICS: dict[str, str] = {
    "numRecordsIn": "Records the task read (sources: rows read from splits).",
    "numRecordsOut": "Records the task emitted downstream or wrote to its sinks.",
    "numRecordsInPerSecond": "numRecordsIn per second, averaged over 60 s (Flink's MeterView).",
    "numRecordsOutPerSecond": "numRecordsOut per second, averaged over 60 s.",
    "currentInputWatermark": "Last watermark received, epoch ms (a source: the one it emits).",
    "busyTimeMsPerSecond": "ms per second neither idle nor back-pressured (5 s average).",
    "idleTimeMsPerSecond": "ms per second waiting for input (5 s average).",
    "backPressuredTimeMsPerSecond": "ms per second waiting for room downstream: 0 (no flow "
    "control yet, issue 13).",
    "accumulatedBusyTime": "Busy ms since the task started running.",
    "accumulatedIdleTime": "Idle ms since the task started running.",
    "accumulatedBackPressuredTime": "Back-pressured ms since the task started running.",
    "numRecordsInErrors": "Malformed records sent to the dead-letter side output (FLIP-33).",
    "numLateRecords": "Millrace: records later than the watermark, sent to the late output.",
    "numBundles": "Millrace: Spark jobs run for bundles.",
}


def task_values(s: TaskMetricsSnapshot) -> dict[str, float]:
    """The task-scope metrics of one snapshot, by Flink's name."""
    return {
        "numRecordsIn": s.records_in,
        "numRecordsOut": s.records_out,
        "numRecordsInPerSecond": s.records_in_per_second,
        "numRecordsOutPerSecond": s.records_out_per_second,
        "currentInputWatermark": s.current_input_watermark_ms,
        "busyTimeMsPerSecond": s.busy_ms_per_second,
        "idleTimeMsPerSecond": s.idle_ms_per_second,
        "backPressuredTimeMsPerSecond": s.backpressured_ms_per_second,
        "accumulatedBusyTime": s.busy_ms,
        "accumulatedIdleTime": s.idle_ms,
        "accumulatedBackPressuredTime": s.backpressured_ms,
        "numRecordsInErrors": s.dead_letters,
        "numLateRecords": s.late_records,
        "numBundles": s.bundles,
    }


def process_values(p: ProcessMetrics) -> dict[str, float]:
    """Process metrics under Flink's JVM names (what they measure: ``process_metrics``)."""
    return {
        "Status.JVM.Memory.Heap.Used": p.rss_bytes,
        "Status.JVM.CPU.Time": p.cpu_time_ns,
        "Status.JVM.Threads.Count": p.threads,
    }


def job_manager_values(infos: list[TaskManagerInfo], jobs: list[JobDetails]) -> dict[str, float]:
    """The JobManager scope: TaskManagers, slots and running jobs."""
    return {
        "numRegisteredTaskManagers": len(infos),
        "taskSlotsTotal": sum(i.slots_total for i in infos),
        "taskSlotsAvailable": sum(i.slots_free for i in infos),
        "numRunningJobs": sum(not j.status.is_globally_terminal for j in jobs),
    }


def job_values(job: JobDetails, stats: CheckpointStatistics | None) -> dict[str, float]:
    """The job scope of a job that has not ended (``flink_jobmanager_job_*``).

    ``uptime`` is the time since submission while RUNNING (Millrace keeps no timestamp of the
    last restart, so after a restart it still counts from the submission) and 0 otherwise;
    ``downtime`` is 0 while RUNNING and left out otherwise (no failing timestamp kept).
    """
    running = job.status is JobStatus.RUNNING
    values: dict[str, float] = {
        "numRestarts": job.restarts,
        "uptime": round(job.duration * 1000) if running else 0,
    }
    if running:
        values["downtime"] = 0
    if stats is not None:
        completed = [r for r in stats.history if r.status == "COMPLETED"]
        last = completed[-1] if completed else None
        values.update(
            {
                "numberOfCompletedCheckpoints": stats.completed,
                "numberOfFailedCheckpoints": stats.failed,
                "numberOfInProgressCheckpoints": stats.in_progress,
                "lastCheckpointDuration": last.duration_ms if last is not None else -1,
                "lastCheckpointSize": last.state_size_bytes if last is not None else -1,
            }
        )
    return values
