"""InputGate beyond ``test_partitions`` and the watermark properties: an alignment completed by
the end of the last channel, and events handed over without waiting for a silent channel."""

from __future__ import annotations

import threading
from concurrent.futures import Future

from millrace.runtime.deployment import InputChannelDescriptor
from millrace.runtime.io.input_gate import BARRIER_CHANNEL, InputGate
from millrace.runtime.io.partition_events import (
    CheckpointBarrier,
    DataBundle,
    EndOfPartition,
    PartitionEvents,
)
from millrace.types import Address, ResultPartitionId
from tests.runtime.io.test_partitions import Producers, drain


def test_the_end_of_the_last_channel_without_the_barrier_completes_the_alignment() -> None:
    producers = Producers(2)
    gate = InputGate(producers.channels, producers.poll)
    producers.partitions[0].add(0, CheckpointBarrier(4, 0))
    assert drain(gate) == []  # channel 0 is blocked behind its barrier, channel 1 silent
    producers.partitions[1].broadcast(EndOfPartition())
    assert drain(gate) == [(1, EndOfPartition()), (BARRIER_CHANNEL, CheckpointBarrier(4, 0))]


class ScriptedProducers:
    """Pulls the test completes itself, one outstanding per channel."""

    def __init__(self, n: int) -> None:
        self.channels = [
            InputChannelDescriptor(ResultPartitionId(f"p{i}"), 0, Address("local://t/te"), i)
            for i in range(n)
        ]
        self.pulls: dict[int, Future[PartitionEvents]] = {}

    def poll(self, channel: InputChannelDescriptor, from_index: int) -> Future[PartitionEvents]:
        future: Future[PartitionEvents] = Future()
        self.pulls[channel.producer_index] = future
        return future


def test_events_of_one_channel_are_handed_over_without_waiting_for_the_others() -> None:
    producers = ScriptedProducers(2)
    gate = InputGate(producers.channels, producers.poll)
    assert gate.poll_next(0) == []  # both channels pulled
    producers.pulls[0].set_result(PartitionEvents(0, (DataBundle("a", 1),)))
    returned = threading.Event()

    def the_silent_channel_speaks_if_still_waited_on() -> None:
        if not returned.wait(timeout=5.0):
            producers.pulls[1].set_result(PartitionEvents(0, (DataBundle("b", 1),)))

    speaker = threading.Thread(target=the_silent_channel_speaks_if_still_waited_on)
    speaker.start()
    try:
        first = gate.poll_next(timeout=30.0)
    finally:
        returned.set()
        speaker.join(timeout=10)
    assert first == [(0, DataBundle("a", 1))]
