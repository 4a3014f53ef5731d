"""Runs a JobGraph through a JobClient while showing its progress with rich.

The executor submits with SubmitJobWait and polls the job's details (splits assigned, subtask
states, records) a few times a second until the result arrives.
"""

from __future__ import annotations

from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from millrace.api.stream_execution_environment import JobSubmissionResult
from millrace.config import ClusterOptions
from millrace.runtime.client.job_client import JobClientGateway
from millrace.runtime.job_result import JobDetails, JobResult
from millrace.runtime.jobgraph import JobGraph
from millrace.runtime.minicluster import MiniCluster

__all__ = ["DetachedExecutor", "EmbeddedClusterExecutor", "ProgressExecutor"]

_POLL_INTERVAL = 0.25  # seconds between JobDetails requests


@dataclass
class ProgressExecutor:
    """A PipelineExecutor that shows progress.

    Args:
        job_client: Gateway of the cluster's JobClient.
        console: Where progress goes.

    Attributes:
        runs: ``(job_graph, result)`` of every job run, in order.
    """

    job_client: JobClientGateway
    console: Console
    runs: list[tuple[JobGraph, JobResult]] = field(default_factory=list)

    def __call__(self, job_graph: JobGraph) -> JobResult:
        waiting = self.job_client.submit_job_wait(job_graph)
        columns = (
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(),
        )
        with Progress(*columns, console=self.console, transient=False) as progress:
            bar = progress.add_task(f"{job_graph.name}: input splits", total=None, detail="")
            while True:
                try:
                    result = waiting.result(timeout=_POLL_INTERVAL)
                    self._show(progress, bar, result.details)
                    break
                except FutureTimeout:
                    pass
                try:
                    details = self.job_client.request_job_details(job_graph.job_id).result(
                        timeout=5
                    )
                except Exception:
                    continue
                self._show(progress, bar, details)
        self.runs.append((job_graph, result))
        return result

    @staticmethod
    def _show(progress: Progress, bar: TaskID, details: JobDetails) -> None:
        states = "  ".join(
            f"{v.name.split(' -> ')[0].split(' by ')[0]}: "
            + ",".join(f"{n} {s}" for s, n in v.states.items())
            for v in details.vertices
        )
        restarts = f" (restarts {details.restarts})" if details.restarts else ""
        progress.update(
            bar,
            total=details.splits_total or None,
            completed=details.splits_assigned,
            detail=f"{details.status.name}{restarts}  {states}",
        )


@dataclass
class DetachedExecutor:
    """A PipelineExecutor that submits with SubmitJobDetached and returns at once.

    Args:
        job_client: Gateway of the JobClient.
        console: Where the job id is printed.
        timeout: Seconds to wait for the Dispatcher's acceptance.

    Attributes:
        submitted: ``(job_graph, job_id)`` of every job submitted, in order.
    """

    job_client: JobClientGateway
    console: Console
    timeout: float = 60.0
    submitted: list[tuple[JobGraph, str]] = field(default_factory=list)

    def __call__(self, job_graph: JobGraph) -> JobSubmissionResult:
        job_id = self.job_client.submit_job_detached(job_graph).result(timeout=self.timeout)
        self.submitted.append((job_graph, job_id))
        self.console.print(f"Job {job_id} ({job_graph.name}) submitted, detached")
        return JobSubmissionResult(job_id, job_graph.name)


@dataclass
class EmbeddedClusterExecutor:
    """A PipelineExecutor of ``millrace run`` without ``--jobmanager``: starts the embedded
    cluster when the script executes its first job, after that job's JobGraph was built and
    checked, so a pipeline that cannot run fails before any endpoint or TaskManager starts.
    Jobs then run with progress (``ProgressExecutor``).

    Args:
        cluster: The embedded cluster, not started yet (the caller closes it).
        console: Where progress goes.

    Attributes:
        runs: ``(job_graph, result)`` of every job run, in order.
    """

    cluster: MiniCluster
    console: Console
    runs: list[tuple[JobGraph, JobResult]] = field(default_factory=list)
    _progress: ProgressExecutor | None = None

    def __call__(self, job_graph: JobGraph) -> JobResult:
        if self._progress is None:
            with self.console.status("Starting the cluster..."):
                self.cluster.start()
            conf = self.cluster.configuration
            self.console.print(
                f"Cluster up: {len(self.cluster.task_executors)} TaskManagers x "
                f"{conf.get(ClusterOptions.NUM_TASK_SLOTS)} slots"
            )
            self._progress = ProgressExecutor(self.cluster.job_client, self.console, self.runs)
        return self._progress(job_graph)
