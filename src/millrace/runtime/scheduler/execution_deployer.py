"""ExecutionDeployer: puts a job's Executions into its slots and takes them out again (Flink's
DefaultExecutionDeployer and ExecutionOperations).

Deploying a vertex moves each of its Executions ``CREATED -> SCHEDULED -> DEPLOYING`` into the
slot of its subtask index (slot sharing) and sends SubmitTask with its
TaskDeploymentDescriptor; a consumer vertex is deployed once all its producers are
(ScheduleOrUpdateConsumers). Cancelling moves every running Execution to CANCELING and sends
cancelTask; those that were never deployed become CANCELED at once, and those whose
TaskManager is gone FAILED. Replies come back on the main thread; what goes wrong is reported to
the :class:`DeploymentListener` (the Scheduler), which decides what it means for the job.

Threading:
    Main thread of the JobMaster (``ComponentMainThreadExecutor``) only.
"""

from __future__ import annotations

import functools
from concurrent.futures import Future
from typing import Protocol

from millrace.errors import RecipientUnreachableError, describe
from millrace.rpc.main_thread_executor import ComponentMainThreadExecutor
from millrace.runtime.checkpoint.state_assignment import StateAssignment
from millrace.runtime.deployment import TaskOperationResult
from millrace.runtime.executiongraph import (
    Execution,
    ExecutionGraph,
    ExecutionJobVertex,
    ExecutionState,
    ExecutionVertex,
)
from millrace.runtime.jobmaster.slot_pool import SlotPool
from millrace.runtime.jobmaster.task_deployment import task_deployment_descriptor
from millrace.runtime.taskexecutor.task_executor_gateway import TaskExecutorGateway
from millrace.types import JobVertexId, ResourceId

__all__ = ["DeploymentListener", "ExecutionDeployer"]


class DeploymentListener(Protocol):
    """What the deployer reports (main thread)."""

    def deployment_failed(self, execution: Execution, cause: str) -> None:
        """SubmitTask of ``execution`` failed or was refused; it is FAILED now."""
        ...

    def cancel_failed(self, execution: Execution, cause: str) -> None:
        """cancelTask of ``execution`` could not be delivered; it is FAILED now."""
        ...

    def task_manager_unreachable(self, resource_id: ResourceId, cause: str) -> None:
        """A call to a TaskManager holding slots of the job found nobody there."""
        ...


class ExecutionDeployer:
    """Deploys and cancels the Executions of one job.

    Args:
        graph: The job's ExecutionGraph.
        slots: The slots the job holds.
        main_thread: The JobMaster's main thread (replies come back there).
        job_master_address: Where the tasks report.
        task_configuration: The configuration every task gets (no secrets).
        listener: Told what went wrong.
    """

    def __init__(
        self,
        graph: ExecutionGraph,
        slots: SlotPool,
        main_thread: ComponentMainThreadExecutor,
        job_master_address: str,
        task_configuration: dict[str, object],
        listener: DeploymentListener,
    ) -> None:
        self._graph = graph
        self._slots = slots
        self._main_thread = main_thread
        self._job_master_address = job_master_address
        self._task_configuration = task_configuration
        self._listener = listener
        self._deployed: set[JobVertexId] = set()

    @property
    def graph(self) -> ExecutionGraph:
        return self._graph

    @property
    def main_thread(self) -> ComponentMainThreadExecutor:
        return self._main_thread

    def reset(self) -> None:
        """A restart: no vertex of the new attempts is deployed."""
        self._deployed.clear()

    def deploy(
        self,
        vertex: ExecutionJobVertex,
        assignment: StateAssignment | None,
        subtasks: list[ExecutionVertex] | None = None,
    ) -> None:
        """Deploy ``subtasks`` of ``vertex`` (default: all; each in CREATED) with their
        restored state from ``assignment``."""
        self._main_thread.assert_running_in_main_thread()
        self._deployed.add(vertex.vertex_id)
        for ev in vertex.task_vertices if subtasks is None else subtasks:
            execution = ev.current_execution
            slot = self._slots.slot_for(ev.subtask_index)
            execution.transition_to(ExecutionState.SCHEDULED)
            execution.allocation_id = slot.allocation_id
            execution.transition_to(ExecutionState.DEPLOYING)
            execution.task_manager, execution.task_manager_id = slot.task_manager, slot.resource_id
            tdd = task_deployment_descriptor(
                self._graph,
                vertex,
                ev,
                slot,
                self._job_master_address,
                self._task_configuration,
                assignment,
            )
            submitting = slot.gateway.submit_task(tdd)
            self._main_thread.when_done(
                submitting, functools.partial(self._submitted, execution=execution)
            )

    def ready_consumers(self, vertex_id: JobVertexId) -> list[ExecutionJobVertex]:
        """The consumers of ``vertex_id`` not deployed yet whose producers all are."""
        return [
            consumer
            for consumer in self._graph.consumers_of(vertex_id)
            if consumer.vertex_id not in self._deployed
            and all(
                p.vertex_id in self._deployed for p in self._graph.producers_of(consumer.vertex_id)
            )
        ]

    def cancel_all(self) -> None:
        """Cancel every Execution that is not terminal (those never deployed: CANCELED at once;
        those whose slot is gone: FAILED)."""
        self._main_thread.assert_running_in_main_thread()
        for execution in self._graph.executions():
            if execution.state in (ExecutionState.CREATED, ExecutionState.SCHEDULED):
                execution.transition_to(ExecutionState.CANCELED)
            elif not execution.state.is_terminal and execution.state is not (
                ExecutionState.CANCELING
            ):
                execution.transition_to(ExecutionState.CANCELING)
                gateway = self.gateway_of(execution)
                if gateway is None:
                    execution.transition_to(ExecutionState.FAILED)
                    continue
                cancelling = gateway.cancel_task(execution.attempt_id)
                self._main_thread.when_done(
                    cancelling, functools.partial(self._cancelled, execution=execution)
                )

    def held_gateways(self) -> list[TaskExecutorGateway]:
        """The TaskExecutor of every slot the job holds."""
        return [slot.gateway for slot in self._slots.slots]

    def gateway_of(self, execution: Execution) -> TaskExecutorGateway | None:
        """The TaskExecutor holding ``execution``'s slot, if the job still holds it."""
        slot = self._slots.get(execution.allocation_id)
        return slot.gateway if slot is not None else None

    def resource_id_of(self, execution: Execution) -> ResourceId | None:
        slot = self._slots.get(execution.allocation_id)
        return slot.resource_id if slot is not None else None

    def _submitted(self, submitting: Future[TaskOperationResult], execution: Execution) -> None:
        error = submitting.exception()
        resource_id = self.resource_id_of(execution)
        if isinstance(error, RecipientUnreachableError) and resource_id is not None:
            self._listener.task_manager_unreachable(resource_id, f"unreachable: {error}")
            return
        if error is None and not submitting.result().success:
            error = RuntimeError(submitting.result().description)
        if error is not None and not execution.state.is_terminal:
            execution.failure = f"deployment failed: {describe(error)}"
            execution.transition_to(ExecutionState.FAILED)
            self._listener.deployment_failed(execution, execution.failure)

    def _cancelled(self, cancelling: Future[TaskOperationResult], execution: Execution) -> None:
        error = cancelling.exception()
        resource_id = self.resource_id_of(execution)
        if isinstance(error, RecipientUnreachableError) and resource_id is not None:
            self._listener.task_manager_unreachable(resource_id, f"unreachable: {error}")
            return
        if error is not None and not execution.state.is_terminal:
            execution.failure = f"TaskManager unreachable: {error}"
            execution.transition_to(ExecutionState.FAILED)
            self._listener.cancel_failed(execution, execution.failure)
