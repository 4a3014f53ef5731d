"""ResultPartition long polls; the InputGate's per-channel watermarks and barrier alignment."""

from __future__ import annotations

from concurrent.futures import Future

import pytest

from millrace.errors import PartitionNotFoundError
from millrace.runtime.deployment import InputChannelDescriptor
from millrace.runtime.io.input_gate import BARRIER_CHANNEL, InputGate
from millrace.runtime.io.partition_events import (
    MIN_WATERMARK,
    CheckpointBarrier,
    DataBundle,
    EndOfPartition,
    PartitionEvents,
    Watermark,
    WatermarkStatus,
)
from millrace.runtime.io.result_partition import ResultPartition
from millrace.types import Address, JobId, ResultPartitionId


def partition(subpartitions: int = 2) -> ResultPartition:
    return ResultPartition(ResultPartitionId("p"), JobId("j"), subpartitions)


def test_poll_returns_existing_events_at_once() -> None:
    p = partition()
    p.add(0, DataBundle("a", 1))
    p.add(0, DataBundle("b", 2))
    reply = p.poll(0, 1).result(0)
    assert (reply.from_index, reply.events) == (1, (DataBundle("b", 2),))
    assert reply.sequences == (1,) and reply.session_ids == (p.session_id,)


def test_parked_poll_completes_on_the_next_event_of_its_subpartition() -> None:
    p = partition()
    waiting = p.poll(1, 0)
    p.add(0, DataBundle("other", 1))
    assert not waiting.done()
    p.add(1, DataBundle("mine", 1))
    assert waiting.result(0).events == (DataBundle("mine", 1),)


def test_expired_poll_completes_empty() -> None:
    p = partition()
    waiting = p.poll(0, 0)
    p.expire(waiting, 0)
    assert waiting.result(0) == PartitionEvents(0, ())


def test_broadcast_reaches_every_subpartition_and_end_finishes() -> None:
    p = partition(3)
    p.broadcast(Watermark(5))
    p.broadcast(EndOfPartition())
    assert p.finished
    for i in range(3):
        assert p.poll(i, 0).result(0).events == (Watermark(5), EndOfPartition())
    with pytest.raises(RuntimeError):
        p.add(0, DataBundle("late", 1))


def test_invalid_subpartition_count_is_rejected() -> None:
    with pytest.raises(ValueError):
        partition(0)


@pytest.mark.parametrize(
    ("subpartition", "from_index", "reason"),
    [(2, 0, "no subpartition 2; it has 2"), (-1, 0, "no subpartition -1"), (0, -1, "no event -1")],
)
def test_a_poll_outside_the_partition_fails_with_partition_not_found(
    subpartition: int, from_index: int, reason: str
) -> None:
    p = partition(2)
    p.add(0, DataBundle("a", 1))  # a negative index would have read it
    with pytest.raises(PartitionNotFoundError, match=reason) as info:
        p.poll(subpartition, from_index)
    assert info.value.partition_id == "p"


class Producers:
    """Partitions standing in for producers; the gate polls them directly."""

    def __init__(self, n: int) -> None:
        self.partitions = [
            ResultPartition(ResultPartitionId(str(i)), JobId("j"), 1) for i in range(n)
        ]
        self.channels = [
            InputChannelDescriptor(ResultPartitionId(str(i)), 0, Address(f"tm-{i}"), i)
            for i in range(n)
        ]

    def poll(self, channel: InputChannelDescriptor, from_index: int) -> Future[PartitionEvents]:
        return self.partitions[channel.producer_index].poll(0, from_index)


def test_gate_watermark_is_the_minimum_over_channels() -> None:
    producers = Producers(2)
    gate = InputGate(producers.channels, producers.poll)
    assert gate.watermark == MIN_WATERMARK
    producers.partitions[0].add(0, Watermark(100))
    gate.poll_next(1.0)
    assert gate.watermark == MIN_WATERMARK  # channel 1 has said nothing yet
    producers.partitions[1].add(0, Watermark(40))
    gate.poll_next(1.0)
    assert gate.watermark == 40


def test_gate_delivers_each_channel_in_order_and_finishes() -> None:
    producers = Producers(2)
    gate = InputGate(producers.channels, producers.poll)
    for i, p in enumerate(producers.partitions):
        p.add(0, DataBundle(f"{i}-a", 1))
        p.add(0, DataBundle(f"{i}-b", 1))
        p.broadcast(EndOfPartition())
    seen: list[tuple[int, object]] = []
    while not gate.finished:
        seen += gate.poll_next(1.0)
    for i in range(2):
        mine = [e for c, e in seen if c == i]
        assert mine == [DataBundle(f"{i}-a", 1), DataBundle(f"{i}-b", 1), EndOfPartition()]


def test_gate_returns_nothing_after_the_timeout() -> None:
    producers = Producers(1)
    gate = InputGate(producers.channels, producers.poll)
    assert gate.poll_next(0.01) == []


def drain(gate: InputGate, rounds: int = 20) -> list[tuple[int, object]]:
    seen: list[tuple[int, object]] = []
    for _ in range(rounds):
        seen += gate.poll_next(0.05)
    return seen


def test_aligned_gate_holds_a_channel_back_after_its_barrier_until_all_arrived() -> None:
    producers = Producers(2)
    gate = InputGate(producers.channels, producers.poll, aligned=True)
    fast, slow = producers.partitions
    fast.add(0, DataBundle("fast-1", 1))
    fast.add(0, CheckpointBarrier(1, 0))
    fast.add(0, DataBundle("fast-2", 1))  # after the barrier: not part of checkpoint 1
    slow.add(0, DataBundle("slow-1", 1))
    seen = drain(gate)
    assert DataBundle("fast-2", 1) not in [e for _, e in seen]
    assert gate.aligning == 1
    assert not any(isinstance(e, CheckpointBarrier) for _, e in seen)

    slow.add(0, CheckpointBarrier(1, 0))
    seen += drain(gate)
    events = [e for _, e in seen]
    barrier_at = events.index(CheckpointBarrier(1, 0))
    assert set(events[:barrier_at]) == {DataBundle("fast-1", 1), DataBundle("slow-1", 1)}
    assert events[barrier_at + 1 :] == [DataBundle("fast-2", 1)]
    assert [c for c, e in seen if isinstance(e, CheckpointBarrier)] == [BARRIER_CHANNEL]
    assert gate.aligning is None


def test_unaligned_gate_lets_records_overtake_and_hands_the_barrier_over_last() -> None:
    producers = Producers(2)
    gate = InputGate(producers.channels, producers.poll, aligned=False)
    fast, slow = producers.partitions
    fast.add(0, CheckpointBarrier(1, 0))
    fast.add(0, DataBundle("fast-2", 1))
    seen = drain(gate)
    assert [e for _, e in seen] == [DataBundle("fast-2", 1)]  # at least once: not held
    slow.add(0, CheckpointBarrier(1, 0))
    assert [e for _, e in drain(gate)] == [CheckpointBarrier(1, 0)]


def test_a_finished_channel_counts_as_aligned() -> None:
    producers = Producers(2)
    gate = InputGate(producers.channels, producers.poll)
    producers.partitions[0].add(0, CheckpointBarrier(3, 0))
    producers.partitions[1].broadcast(EndOfPartition())
    assert CheckpointBarrier(3, 0) in [e for _, e in drain(gate)]


def test_a_newer_barrier_abandons_an_unfinished_alignment() -> None:
    producers = Producers(2)
    gate = InputGate(producers.channels, producers.poll)
    a, b = producers.partitions
    a.add(0, CheckpointBarrier(1, 0))  # checkpoint 1 never reaches b (it was aborted)
    a.add(0, DataBundle("a-2", 1))
    a.add(0, CheckpointBarrier(2, 0))
    drain(gate)
    b.add(0, CheckpointBarrier(2, 0))
    events = [e for _, e in drain(gate)]
    assert DataBundle("a-2", 1) in events and CheckpointBarrier(2, 0) in events
    assert CheckpointBarrier(1, 0) not in events


def test_an_idle_channel_does_not_hold_the_watermark_and_it_never_goes_back() -> None:
    producers = Producers(2)
    gate = InputGate(producers.channels, producers.poll)
    busy, quiet = producers.partitions
    quiet.add(0, WatermarkStatus(False))
    busy.add(0, Watermark(500))
    events = drain(gate)
    assert gate.watermark == 500
    assert all(not isinstance(e, WatermarkStatus) for _, e in events)
    quiet.add(0, WatermarkStatus(True))  # active again, far behind
    quiet.add(0, Watermark(100))
    drain(gate)
    assert gate.watermark == 500


def test_when_every_channel_is_idle_the_gate_releases_the_largest_watermark() -> None:
    producers = Producers(2)
    gate = InputGate(producers.channels, producers.poll)
    behind, ahead = producers.partitions
    behind.add(0, Watermark(100))
    ahead.add(0, Watermark(900))
    ahead.add(0, WatermarkStatus(False))  # the one ahead goes idle first
    drain(gate)
    assert gate.watermark == 100
    behind.add(0, WatermarkStatus(False))
    drain(gate)
    assert gate.watermark == 900
