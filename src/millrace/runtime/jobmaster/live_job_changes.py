"""LiveJobChanges: change a running job's JobGraph at a savepoint, state kept (issue 13).

Seed 001's dynamic DAG, beyond Gearpump: the change keeps the job's state. A change
(:class:`~millrace.runtime.jobmaster.job_change.JobChangeRequest`) is applied in four steps,
all on the JobMaster's main thread:

1. a savepoint: its barrier splits the stream; every record before it went through the old
   JobGraph and its effects (window and keyed state, source positions, the sinks' commit) are in
   the savepoint;
2. the old Scheduler is cancelled (its ExecutionGraph ends CANCELED; the JobMaster keeps its
   slots and does not publish a result: ``retiring``); the sinks' data staged after the barrier
   is dropped, so every record after the barrier reaches the output only through step 4;
3. the JobGraph's vertices are changed in place (a transform's function, or parallelisms) and
   the job's ``savepoint_path`` is set to the savepoint;
4. a new Scheduler (a new ExecutionGraph, the same job id, slots and SinkCommitter) starts from
   the savepoint: key groups are redistributed over the new parallelism and source splits
   reassigned as for any restore (``assign_state``).

This is Flink's stop-with-savepoint-and-resume done inside one JobMaster (Flink's
AdaptiveScheduler restarts the same way to rescale). The reply gives the switch's timestamps
once every new source subtask runs and, within CONSUMER_WAIT more seconds, every other one
(consumers deploy on their first input); the downtime is from the stop (step 2) to every new
task RUNNING, or to every source RUNNING if the others did not run yet (``JobChangeResult``).

Threading:
    Main thread of the JobMaster only.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future
from typing import Protocol

from millrace.config import Configuration, ExecutionOptions
from millrace.config import RuntimeExecutionMode as Mode
from millrace.errors import CheckpointError, JobChangeError, describe
from millrace.rpc.main_thread_executor import ComponentMainThreadExecutor
from millrace.runtime.checkpoint.checkpoint_storage import CheckpointMetadata
from millrace.runtime.executiongraph import Execution, ExecutionState, JobStatus
from millrace.runtime.job_result import JobResult
from millrace.runtime.jobgraph import JobGraph
from millrace.runtime.jobmaster.job_change import (
    ChainSplit,
    JobChangeRequest,
    JobChangeResult,
    VertexChange,
    plan_change,
)
from millrace.runtime.jobmaster.slot_pool import SlotPool
from millrace.runtime.scheduler import Scheduler

__all__ = ["ChangeableJob", "LiveJobChanges"]

logger = logging.getLogger(__name__)

RUNNING_WAIT = 60.0  # seconds the reply waits for the new source tasks to run
CONSUMER_WAIT = 30.0  # seconds it waits more for the others (deployed on their first input)
_POLL = 0.05  # seconds between looks at the new tasks


class ChangeableJob(Protocol):
    """What LiveJobChanges needs from the JobMaster."""

    job_graph: JobGraph
    scheduler: Scheduler

    def create_scheduler(self) -> Scheduler:
        """A new Scheduler of ``job_graph`` (not started), with the job's slots and sinks."""
        ...

    def job_terminated(self, result: JobResult) -> None:
        """The job ended: free its slots and publish ``result``."""
        ...


class LiveJobChanges:
    """Applies live changes to one job, one at a time.

    Args:
        job: The JobMaster.
        main_thread: Its main thread.
        configuration: The job's configuration (its runtime mode).
        slots: The job's slots (their TaskExecutors release the old run's partitions).

    Attributes:
        retiring: Whether a Scheduler is being cancelled for a change (the JobMaster hands its
            ``job_terminated`` to :meth:`retired` instead of ending the job).
    """

    def __init__(
        self,
        job: ChangeableJob,
        main_thread: ComponentMainThreadExecutor,
        configuration: Configuration,
        slots: SlotPool,
    ) -> None:
        self._job = job
        self._slots = slots
        self._main_thread = main_thread
        self._batch = configuration.get(ExecutionOptions.RUNTIME_MODE) is Mode.BATCH
        self.retiring = False
        self._stopping = self._cancelled = False  # between the stop and the restart; cancelled
        self._busy = False
        self._plan: list[ChainSplit | VertexChange] = []
        self._request = JobChangeRequest()
        self._savepoint: CheckpointMetadata | None = None
        self._stopped_ms = 0
        self._reply: Future[JobChangeResult] = Future()

    def change(self, request: JobChangeRequest) -> Future[JobChangeResult]:
        """Apply ``request`` at a savepoint (see the module docstring).

        Returns:
            Future completed with the JobChangeResult once the changed job runs.

        Raises:
            JobChangeError: via the future, if the job is BATCH or not RUNNING, a change is in
                progress, the request does not fit the JobGraph (``plan_change``), or the job
                ended or failed over before the changed job ran.
            CheckpointError: via the future, if the savepoint cannot be taken (the job runs on
                unchanged).
        """
        self._main_thread.assert_running_in_main_thread()
        reply: Future[JobChangeResult] = Future()
        scheduler, name = self._job.scheduler, self._job.job_graph.name
        try:
            if self._batch:
                raise JobChangeError(f"job {name!r} is a BATCH job; only STREAMING jobs change")
            if self._busy:
                raise JobChangeError(f"job {name!r} is being changed already; retry after it")
            if scheduler.status is not JobStatus.RUNNING:
                raise JobChangeError(f"job {name!r} is {scheduler.status.name}, not RUNNING")
            if scheduler.checkpoints.settings.max_concurrent > 1:
                # a periodic checkpoint after the savepoint's barrier could complete (and
                # commit) after the old tasks stopped, and the new ones would replay it
                raise JobChangeError(
                    f"job {name!r} runs execution.checkpointing.max-concurrent-checkpoints="
                    f"{scheduler.checkpoints.settings.max_concurrent}; a live change needs 1"
                )
            plan = plan_change(self._job.job_graph, request)
            taking = scheduler.checkpoints.trigger(is_savepoint=True)
        except (JobChangeError, CheckpointError) as error:
            reply.set_exception(error)
            return reply
        logger.info("job %s: %s at a savepoint", name, request.describe())
        self._busy, self._plan, self._request, self._reply = True, plan, request, reply
        self._main_thread.when_done(taking, lambda f: self._savepoint_taken(scheduler, f))
        return reply

    def _savepoint_taken(self, scheduler: Scheduler, taking: Future[CheckpointMetadata]) -> None:
        if taking.exception() is not None:
            self._fail(taking.exception())  # type: ignore[arg-type]
            return
        if self._job.scheduler is not scheduler or scheduler.status is not JobStatus.RUNNING:
            self._fail(JobChangeError(f"the job went {scheduler.status.name} during the savepoint"))
            return
        self._savepoint = taking.result()
        self._stopped_ms = scheduler.graph.history.now_ms()
        self.retiring = self._stopping = True
        logger.info(
            "job %s: savepoint %d at %s; stopping the old tasks",
            self._job.job_graph.name,
            self._savepoint.checkpoint_id,
            self._savepoint.location,
        )
        scheduler.cancel()

    def cancel(self, scheduler: Scheduler) -> None:
        """The user cancels the job (``JobMaster.cancel``): ``scheduler`` is cancelled, and a
        change between its stop and its restart is dropped (its reply fails, the job ends
        CANCELED).

        Threading:
            Main thread only.
        """
        self._main_thread.assert_running_in_main_thread()
        self._cancelled = self._stopping
        scheduler.cancel()

    def retired(self, result: JobResult) -> None:
        """The old Scheduler ended (its ``job_terminated``, whose ``result`` is dropped unless
        the user cancelled meanwhile): start the changed job, once the old Scheduler's call has
        returned.

        Threading:
            Main thread only.
        """
        self._main_thread.assert_running_in_main_thread()
        self.retiring = False
        self._main_thread.execute(lambda: self._restart_changed(result))

    def _restart_changed(self, result: JobResult) -> None:
        self._stopping = False
        if self._cancelled:
            self._fail(JobChangeError("the job was cancelled during the change"))
            self._job.job_terminated(result)
            return
        old, savepoint = self._job.scheduler, self._savepoint
        assert savepoint is not None
        for slot in self._slots.slots:
            slot.gateway.release_partitions(self._job.job_graph.job_id)
        for vertex_change in self._plan:
            vertex_change.apply()
        self._job.job_graph.savepoint_path = savepoint.location
        new = self._job.create_scheduler()
        new.restarts = old.restarts
        self._job.scheduler = new
        logger.info(
            "job %s: %s; restarting from savepoint %d",
            self._job.job_graph.name,
            self._request.describe(),
            savepoint.checkpoint_id,
        )
        new.start()
        deadline = self._main_thread.clock.monotonic() + RUNNING_WAIT
        self._main_thread.schedule(lambda: self._await_running(new, deadline), _POLL)

    def _await_running(
        self, scheduler: Scheduler, deadline: float, consumers_by: float | None = None
    ) -> None:
        """Poll until every source subtask RUNS (by ``deadline``), then up to CONSUMER_WAIT s
        more for every other subtask (consumers deploy on their first input)."""
        if self._job.scheduler is not scheduler or scheduler.status is not JobStatus.RUNNING:
            self._fail(
                JobChangeError(
                    f"the changed job went {scheduler.status.name} before it ran: "
                    f"{self._request.describe()} applied from savepoint {self._savepoint_path()}"
                )
            )
            return
        now, executions = self._main_thread.clock.monotonic(), scheduler.graph.executions()
        sources = [e for e in executions if e.vertex.job_vertex.job_vertex.is_source]
        if not all(e.state is ExecutionState.RUNNING for e in sources):
            if now >= deadline:
                self._fail(
                    JobChangeError(f"the changed job's sources did not run in {RUNNING_WAIT:g} s")
                )
            else:
                self._main_thread.schedule(lambda: self._await_running(scheduler, deadline), _POLL)
            return
        consumers_by = now + CONSUMER_WAIT if consumers_by is None else consumers_by
        everyone = all(e.state is ExecutionState.RUNNING for e in executions)
        if not everyone and now < consumers_by:
            self._main_thread.schedule(
                lambda: self._await_running(scheduler, deadline, consumers_by), _POLL
            )
            return
        self._complete(scheduler, sources, everyone)

    def _complete(self, scheduler: Scheduler, sources: list[Execution], everyone: bool) -> None:
        savepoint = self._savepoint
        assert savepoint is not None

        def running_ms(executions: list[Execution]) -> int:
            return max(e.timestamps.get(ExecutionState.RUNNING, 0) for e in executions)

        result = JobChangeResult(
            job_id=self._job.job_graph.job_id,
            change=self._request.describe(),
            savepoint=savepoint.location,
            checkpoint_id=savepoint.checkpoint_id,
            barrier_ms=savepoint.timestamp_ms,
            stopped_ms=self._stopped_ms,
            sources_ms=running_ms(sources),
            running_ms=running_ms(scheduler.graph.executions()) if everyone else -1,
        )
        logger.info(
            "job %s: %s done; %s", self._job.job_graph.name, result.change, result.downtime()
        )
        self._busy = False
        self._reply.set_result(result)

    def _savepoint_path(self) -> str:
        return self._savepoint.location if self._savepoint is not None else "?"

    def _fail(self, error: BaseException) -> None:
        self._busy = self.retiring = self._stopping = self._cancelled = False
        logger.warning("job %s: change failed: %s", self._job.job_graph.name, describe(error))
        if not self._reply.done():
            self._reply.set_exception(error)
