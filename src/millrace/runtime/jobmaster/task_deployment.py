"""Building the TaskDeploymentDescriptor of one subtask (Flink's TaskDeploymentDescriptorFactory).

Threading:
    Pure functions over the JobMaster's state: call them on the JobMaster's main thread.
"""

from __future__ import annotations

from millrace.runtime.checkpoint.state_assignment import StateAssignment
from millrace.runtime.deployment import InputChannelDescriptor, TaskDeploymentDescriptor
from millrace.runtime.executiongraph import ExecutionGraph, ExecutionJobVertex, ExecutionVertex
from millrace.runtime.jobmaster.slot_pool import AllocatedSlot
from millrace.types import Address

__all__ = ["task_deployment_descriptor"]


def task_deployment_descriptor(
    graph: ExecutionGraph,
    vertex: ExecutionJobVertex,
    subtask: ExecutionVertex,
    slot: AllocatedSlot,
    job_master_address: str,
    configuration: dict[str, object],
    assignment: StateAssignment | None,
) -> TaskDeploymentDescriptor:
    """The descriptor that deploys ``subtask``'s current execution into ``slot``.

    Args:
        graph: The job's ExecutionGraph; every producer of ``vertex`` is deployed already, so
            each producer execution has its ``task_manager``.
        vertex: The vertex of ``subtask``.
        subtask: The subtask to deploy.
        slot: The slot it runs in.
        job_master_address: Where the task reports.
        configuration: The job's configuration, as plain values, without ``security.*``
            (``Configuration.without_security``: secrets never travel in deployments).
        assignment: The restored state to hand out, or None when the job starts empty.

    Returns:
        A descriptor with one input channel per producer subtask of every input edge, in
        the edges' order, each tagged with its edge's input index (subpartition =
        ``subtask.subtask_index``) and, when the vertex has consumers, one output partition
        with one subpartition per consumer subtask.
    """
    execution = subtask.current_execution
    job_graph = graph.job_graph
    consumers = graph.consumers_of(vertex.vertex_id)
    channels = tuple(
        InputChannelDescriptor(
            p.current_execution.partition_id,
            subtask.subtask_index,
            p.current_execution.task_manager,  # type: ignore[arg-type]  # deployed: not None
            p.subtask_index,
            edge.input_index,
        )
        for edge in job_graph.inputs_of(vertex.vertex_id)
        for p in graph.job_vertex(edge.source).task_vertices
    )
    restore = (
        assignment.tasks.get((vertex.vertex_id, subtask.subtask_index))
        if assignment is not None
        else None
    )
    return TaskDeploymentDescriptor(
        job_id=job_graph.job_id,
        job_name=job_graph.name,
        job_master_address=Address(job_master_address),
        vertex_id=vertex.vertex_id,
        task_name=subtask.task_name,
        subtask_index=subtask.subtask_index,
        parallelism=vertex.parallelism,
        attempt_id=execution.attempt_id,
        allocation_id=slot.allocation_id,
        invokable=vertex.job_vertex.invokable,
        operators=tuple(vertex.job_vertex.operators),
        is_source=vertex.job_vertex.is_source,
        output_partition=execution.partition_id if consumers else None,
        num_subpartitions=consumers[0].parallelism if consumers else 0,
        input_channels=channels,
        max_parallelism=job_graph.max_parallelism,
        configuration=configuration,
        restore=restore,
    )
