"""BatchScheduling: the Scheduler's BATCH mode (Flink's ``execution.runtime-mode: BATCH``).

* **Blocking exchanges** (Flink's BLOCKING result partitions): a consumer vertex is deployed
  once every subtask of its producers FINISHED, instead of at its producers' first event, and
  reads their complete output from the exchange store.
* **Region failover** (``runtime/failover/region_failover.py``): a failed consumer subtask
  whose inputs are complete, or a failed source subtask whose splits can go back to its
  enumerator (Flink's ``addSplitsBack``), gets a new attempt, after the restart strategy's
  delay and within its limits, in a slot of the job (requested again if its TaskManager is
  gone); the other subtasks are not touched and the job stays RUNNING. Any other failure falls
  back to the Scheduler's global failover.
* **No checkpoints**: the Scheduler does not start the CheckpointCoordinator (Flink ignores
  checkpointing in BATCH); the end of the job is committed by the final checkpoint.

Threading:
    Main thread of the JobMaster only (``ComponentMainThreadExecutor``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Protocol

from millrace.config import CheckpointingOptions, Configuration, ExecutionOptions
from millrace.config import RuntimeExecutionMode as Mode
from millrace.rpc.main_thread_executor import ComponentMainThreadExecutor
from millrace.runtime.checkpoint.state_assignment import StateAssignment
from millrace.runtime.executiongraph import ExecutionGraph, ExecutionState, JobStatus
from millrace.runtime.failover.region_failover import inputs_complete, regions_to_restart
from millrace.runtime.failover.restart_strategy import RestartStrategy
from millrace.runtime.scheduler.execution_deployer import ExecutionDeployer
from millrace.runtime.scheduler.scheduler_context import SchedulerContext
from millrace.runtime.source.source_coordinator import SourceCoordinator
from millrace.types import JobVertexId

__all__ = ["BatchScheduling", "SchedulerState", "batch_scheduling"]


class SchedulerState(Protocol):
    """What BatchScheduling reads of its Scheduler, always current (both are replaced at a
    global restart)."""

    @property
    def sources(self) -> Mapping[JobVertexId, SourceCoordinator]:
        """The sources' coordinators."""
        ...

    @property
    def assignment(self) -> StateAssignment | None:
        """The restored state to deploy with."""
        ...


logger = logging.getLogger(__name__)


def batch_scheduling(
    configuration: Configuration,
    deployer: ExecutionDeployer,
    restart_strategy: RestartStrategy,
    context: SchedulerContext,
    scheduler: SchedulerState,
) -> BatchScheduling | None:
    """The BatchScheduling of a job whose ``execution.runtime-mode`` is BATCH, else None.

    Args:
        configuration: The job's configuration (its runtime mode resolved by the client).
        deployer: The Scheduler's ExecutionDeployer (with its graph and main thread).
        restart_strategy: The job's restart strategy.
        context: The Scheduler's context (its ``request_slots``).
        scheduler: The Scheduler (its sources and restored state, when asked).
    """
    if configuration.get(ExecutionOptions.RUNTIME_MODE) is not Mode.BATCH:
        return None
    if configuration.get(CheckpointingOptions.INTERVAL) > 0:
        logger.info("execution.checkpointing.interval is ignored in BATCH mode (as in Flink)")
    return BatchScheduling(
        deployer.graph,
        deployer,
        deployer.main_thread,
        restart_strategy,
        context.request_slots,
        scheduler,
    )


class BatchScheduling:
    """Deploys a BATCH job stage by stage and restarts failed regions.

    Args:
        graph: The job's ExecutionGraph.
        deployer: The Scheduler's ExecutionDeployer.
        main_thread: The JobMaster's main thread.
        restart_strategy: The job's restart strategy (shared with the global failover).
        request_slots: Asks for the slots the job lacks; ``deploy_restarted`` follows.
        scheduler: The Scheduler (its sources and restored state, when asked).

    Attributes:
        region_restarts: Regions (subtasks) run again so far.
    """

    def __init__(
        self,
        graph: ExecutionGraph,
        deployer: ExecutionDeployer,
        main_thread: ComponentMainThreadExecutor,
        restart_strategy: RestartStrategy,
        request_slots: Callable[[], None],
        scheduler: SchedulerState,
    ) -> None:
        self._graph = graph
        self._deployer = deployer
        self._main_thread = main_thread
        self._restart_strategy = restart_strategy
        self._request_slots = request_slots
        self._scheduler = scheduler
        self.region_restarts = 0

    def producer_finished(self) -> None:
        """A subtask FINISHED: deploy every consumer vertex whose producers all have."""
        self._main_thread.assert_running_in_main_thread()
        for vertex in self._graph.vertices:
            pending = [ev for ev in vertex.task_vertices if ev.state is ExecutionState.CREATED]
            if (
                vertex.job_vertex.is_source
                or len(pending) != vertex.parallelism
                or not inputs_complete(self._graph, pending[0])
            ):
                continue
            logger.info(
                "job %s: deploying %s (its blocking inputs are complete)",
                self._graph.job_graph.name,
                vertex.name,
            )
            self._deployer.deploy(vertex, self._scheduler.assignment)

    def restart_regions(self, cause: str) -> bool:
        """Run the failed subtasks again if each is a region of its own (see
        ``regions_to_restart``); the restart strategy has allowed one more restart.

        Returns:
            True if a region restart is scheduled; False when the failure needs the global
            failover.
        """
        self._main_thread.assert_running_in_main_thread()
        regions = regions_to_restart(self._graph, self._rewindable())
        if regions is None:
            return False
        logger.warning(
            "job %s: %s; re-running %s from their blocking inputs (region failover, %r)",
            self._graph.job_graph.name,
            cause,
            ", ".join(ev.task_name for ev in regions),
            self._restart_strategy,
        )
        self._main_thread.schedule(self._restart, self._restart_strategy.restart_delay())
        return True

    def _restart(self) -> None:
        if self._graph.status is not JobStatus.RUNNING:
            return  # a global failover or the end of the job took over
        regions = regions_to_restart(self._graph, self._rewindable()) or []
        sources = self._scheduler.sources
        for ev in regions:
            if ev.job_vertex.job_vertex.is_source:  # its splits go out again (addSplitsBack)
                sources[ev.job_vertex.vertex_id].add_splits_back(ev.subtask_index)
            self._graph.reset_subtask(ev)
        self.region_restarts += len(regions)
        if regions:
            self._request_slots()

    def _rewindable(self) -> frozenset[JobVertexId]:
        """The source vertices whose splits can go back to their enumerator."""
        return frozenset(v for v, s in self._scheduler.sources.items() if s.takes_splits_back)

    def deploy_restarted(self) -> bool:
        """Every slot is held: deploy the subtasks that a region restart left CREATED.

        Returns:
            False when no subtask ran yet (the first deployment is the Scheduler's).
        """
        self._main_thread.assert_running_in_main_thread()
        executions = self._graph.executions()
        if all(e.state is ExecutionState.CREATED for e in executions):
            return False
        for vertex in self._graph.vertices:  # inputs_complete: always, for a source
            created = [
                ev
                for ev in vertex.task_vertices
                if ev.state is ExecutionState.CREATED and inputs_complete(self._graph, ev)
            ]
            if created:
                logger.info(
                    "job %s: deploying %s again",
                    self._graph.job_graph.name,
                    ", ".join(ev.task_name for ev in created),
                )
                self._deployer.deploy(vertex, self._scheduler.assignment, created)
        return True
