"""An InputGate over the channels of two inputs (a join's, or a union's several producers):
one watermark and one barrier alignment over every channel of both, each channel's input
known from its descriptor; and the deployment descriptor that tags each channel."""

from __future__ import annotations

from millrace.runtime.deployment import InputChannelDescriptor
from millrace.runtime.executiongraph import ExecutionGraph
from millrace.runtime.io.input_gate import BARRIER_CHANNEL, InputGate
from millrace.runtime.io.partition_events import (
    MIN_WATERMARK,
    CheckpointBarrier,
    DataBundle,
    EndOfPartition,
    Watermark,
)
from millrace.runtime.jobgraph import DistributionPattern, JobEdge, JobGraph, JobVertex
from millrace.runtime.jobmaster.slot_pool import AllocatedSlot
from millrace.runtime.jobmaster.task_deployment import task_deployment_descriptor
from millrace.types import Address, AllocationId, ResourceId, ResultPartitionId
from tests.runtime.io.test_partitions import Producers, drain


class TwoInputs(Producers):
    """Producers 0 and 1 feed input 0, producer 2 input 1."""

    def __init__(self) -> None:
        super().__init__(3)
        self.channels = [
            InputChannelDescriptor(ResultPartitionId(str(i)), 0, Address(f"tm-{i}"), i, side)
            for i, side in enumerate((0, 0, 1))
        ]


def test_watermark_is_the_minimum_over_the_channels_of_both_inputs() -> None:
    producers = TwoInputs()
    gate = InputGate(producers.channels, producers.poll)
    producers.partitions[0].add(0, Watermark(100))
    producers.partitions[1].add(0, Watermark(90))
    drain(gate, rounds=3)
    assert gate.watermark == MIN_WATERMARK  # the second input has said nothing yet
    producers.partitions[2].add(0, Watermark(50))
    drain(gate, rounds=3)
    assert gate.watermark == 50
    producers.partitions[2].add(0, Watermark(200))
    drain(gate, rounds=3)
    assert gate.watermark == 90


def test_a_barrier_is_aligned_over_both_inputs_and_later_rows_wait() -> None:
    producers = TwoInputs()
    gate = InputGate(producers.channels, producers.poll, aligned=True)
    for i in (0, 1):
        producers.partitions[i].add(0, CheckpointBarrier(7, 0))
        producers.partitions[i].add(0, DataBundle(f"after-{i}", 1))
    seen = drain(gate)
    assert seen == []  # input 0 is blocked behind its barriers; input 1 has not sent it
    producers.partitions[2].add(0, DataBundle("before-2", 1))
    producers.partitions[2].add(0, CheckpointBarrier(7, 0))
    seen = drain(gate)
    assert seen[:2] == [(2, DataBundle("before-2", 1)), (BARRIER_CHANNEL, CheckpointBarrier(7, 0))]
    assert sorted(seen[2:]) == [(0, DataBundle("after-0", 1)), (1, DataBundle("after-1", 1))]
    sides = {channel: producers.channels[channel].input_index for channel, _ in seen[2:]}
    assert sides == {0: 0, 1: 0}


def test_the_gate_finishes_only_when_both_inputs_ended() -> None:
    producers = TwoInputs()
    gate = InputGate(producers.channels, producers.poll)
    for i in (0, 1):
        producers.partitions[i].broadcast(EndOfPartition())
    drain(gate, rounds=3)
    assert not gate.finished
    producers.partitions[2].broadcast(EndOfPartition())
    drain(gate, rounds=3)
    assert gate.finished


class _Gateway:
    pass


def test_deployment_gives_one_channel_per_producer_subtask_of_every_edge_with_its_input() -> None:
    left = JobVertex("left", 2, "x:Y", is_source=True)
    right = JobVertex("right", 1, "x:Y", is_source=True)
    extra = JobVertex("left too", 1, "x:Y", is_source=True)  # a union on input 0
    join = JobVertex("join", 3, "x:Z")
    graph = JobGraph(
        "job",
        [left, right, extra, join],
        [
            JobEdge(left.vertex_id, join.vertex_id, DistributionPattern.HASH, ("k",), 0),
            JobEdge(right.vertex_id, join.vertex_id, DistributionPattern.HASH, ("k",), 1),
            JobEdge(extra.vertex_id, join.vertex_id, DistributionPattern.HASH, ("k",), 0),
        ],
    )
    execution_graph = ExecutionGraph(graph)
    for producer in (left, right, extra):
        for ev in execution_graph.job_vertex(producer.vertex_id).task_vertices:
            ev.current_execution.task_manager = Address(f"tm-{producer.name}")
    consumer = execution_graph.job_vertex(join.vertex_id)
    slot = AllocatedSlot(AllocationId("a"), ResourceId("r"), Address("tm"), _Gateway())  # type: ignore[arg-type]
    tdd = task_deployment_descriptor(
        execution_graph, consumer, consumer.task_vertices[2], slot, "jm", {}, None
    )
    got = [
        (c.producer_address, c.producer_index, c.input_index, c.subpartition_index)
        for c in tdd.input_channels
    ]
    assert got == [
        ("tm-left", 0, 0, 2),
        ("tm-left", 1, 0, 2),
        ("tm-right", 0, 1, 2),
        ("tm-left too", 0, 0, 2),
    ]
