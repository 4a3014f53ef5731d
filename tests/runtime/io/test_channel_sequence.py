"""Seed 001's message-loss detection, consumer end: the sequence checks (pure), the InputGate
answering AckRequests, and each injected fault (drop, repeat, delay, stale session) caught by
the gate at the spoiled event, before the task sees it."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from millrace.config import Configuration, FlowControlOptions
from millrace.errors import ConfigError, MessageLossError
from millrace.runtime.deployment import InputChannelDescriptor
from millrace.runtime.io.channel_fault_injection import ChannelFault, ChannelFaultInjector
from millrace.runtime.io.channel_sequence import ChannelSequence, channel_session_id
from millrace.runtime.io.channel_window import FlowControlSettings
from millrace.runtime.io.input_gate import BARRIER_CHANNEL, InputGate
from millrace.runtime.io.partition_events import (
    Ack,
    CheckpointBarrier,
    DataBundle,
    EndOfPartition,
)
from millrace.runtime.io.result_partition import ResultPartition
from millrace.types import JobId, ResultPartitionId
from tests.runtime.io.test_partitions import Producers, drain


def test_events_in_sequence_pass() -> None:
    checked = ChannelSequence("c", 5)
    for sequence in range(3):
        checked.check(5, sequence)
    assert checked.expected == 3 == checked.received


@pytest.mark.parametrize(
    ("session", "sequence", "kind", "expected", "seen"),
    [(5, 3, "gap", 2, 3), (5, 1, "repeat", 2, 1), (4, 2, "stale session", 5, 4)],
)
def test_a_gap_a_repeat_or_a_stale_session_fails_naming_the_channel(
    session: int, sequence: int, kind: str, expected: int, seen: int
) -> None:
    checked = ChannelSequence("producer 0 -> consumer 1", 5)
    checked.check(5, 0)
    checked.check(5, 1)
    with pytest.raises(MessageLossError) as info:
        checked.check(session, sequence)
    error = info.value
    assert (error.kind, error.expected, error.seen) == (kind, expected, seen)
    assert (
        "producer 0 -> consumer 1" in str(error)
        and f"expected {'session' if kind == 'stale session' else 'sequence number'} {expected}"
        in str(error)
    )
    assert checked.expected == 2  # the bad event was not taken


def test_the_session_is_new_for_every_producer_attempt() -> None:
    assert channel_session_id("attempt-1") != channel_session_id("attempt-2")
    assert channel_session_id("attempt-1") == channel_session_id("attempt-1")


def test_a_session_id_is_a_63_bit_number_using_all_63_bits() -> None:
    """Session ids travel in control messages as non-negative signed 64-bit integers (msgpack,
    Java's long): each is below 2**63, and the ids of many attempts spread over the whole
    range (a narrower id would make two attempts' sessions collide more often)."""
    ids = [channel_session_id(f"attempt-{i}") for i in range(256)]
    assert all(0 <= i < 2**63 for i in ids)
    assert max(ids) >= 2**62  # the top bit is used: 256 ids all below it has odds 2**-256
    assert len(set(ids)) == 256
    for i in ids:
        assert struct.unpack(">q", struct.pack(">q", i)) == (i,)


class Acks:
    def __init__(self) -> None:
        self.sent: list[tuple[int, Ack]] = []

    def __call__(self, channel: InputChannelDescriptor, ack: Ack) -> None:
        self.sent.append((channel.producer_index, ack))


def flow_controlled(producers: Producers, interval: int = 2) -> None:
    settings = FlowControlSettings(True, 4, 10**9, interval)
    producers.partitions = [
        ResultPartition(ResultPartitionId(str(i)), JobId("j"), 1, settings)
        for i in range(len(producers.partitions))
    ]


def test_the_gate_answers_an_ack_request_once_the_task_took_the_events_before_it() -> None:
    producers = Producers(1)
    flow_controlled(producers, interval=2)
    acks = Acks()
    gate = InputGate(producers.channels, producers.poll, ack=acks)
    p = producers.partitions[0]
    p.add(0, DataBundle("a", 1))
    p.add(0, DataBundle("b", 1))  # then AckRequest (sequence 2)
    handed = gate.poll_next(1.0)
    assert handed == [(0, DataBundle("a", 1)), (0, DataBundle("b", 1))]  # no AckRequest
    assert acks.sent == []  # the task has not taken them yet
    gate.poll_next(0.01)
    assert acks.sent == [(0, Ack(p.session_id, 2, 3))]
    p.acknowledge(0, acks.sent[0][1])
    assert p.windows[0].unacked_bundles == 0


def test_an_ack_request_behind_a_barrier_is_answered_after_the_alignment() -> None:
    producers = Producers(2)
    flow_controlled(producers, interval=1)
    acks = Acks()
    gate = InputGate(producers.channels, producers.poll, aligned=True, ack=acks)
    fast, slow = producers.partitions
    fast.add(0, CheckpointBarrier(1, 0))
    fast.add(0, DataBundle("after", 1))  # then AckRequest: held with the bundle
    drain(gate, rounds=5)
    assert acks.sent == []
    slow.add(0, CheckpointBarrier(1, 0))
    seen = drain(gate, rounds=5)
    assert (BARRIER_CHANNEL, CheckpointBarrier(1, 0)) in seen and (
        0,
        DataBundle("after", 1),
    ) in seen
    assert [channel for channel, _ in acks.sent] == [0]


@pytest.mark.parametrize(
    ("kind", "error_kind"),
    [("drop", "gap"), ("repeat", "repeat"), ("delay", "gap"), ("stale", "stale session")],
)
def test_each_injected_fault_fails_the_gate_at_the_spoiled_bundle(
    kind: str, error_kind: str, tmp_path: Path
) -> None:
    producers = Producers(1)
    fault = ChannelFault(kind, producer=0, consumer=0, bundle=1)
    settings = FlowControlSettings(True, 8, 10**9, 4)
    p = ResultPartition(
        ResultPartitionId("0"),
        JobId("j"),
        1,
        settings,
        ChannelFaultInjector(fault, 0, tmp_path / "marker"),
    )
    producers.partitions = [p]
    gate = InputGate(producers.channels, producers.poll)
    p.add(0, DataBundle("b0", 1))
    assert gate.poll_next(1.0) == [(0, DataBundle("b0", 1))]
    for name in ("b1", "b2", "b3"):  # the fault hits b1; the first AckRequest follows b3
        p.add(0, DataBundle(name, 1))
    with pytest.raises(MessageLossError) as info:
        drain(gate, rounds=3)
    assert info.value.kind == error_kind
    assert (tmp_path / "marker").exists()


def test_a_fault_fires_once_per_job(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    marker.touch()  # an earlier attempt spoiled its bundle already
    fault = ChannelFault("drop", 0, 0, 0)
    p = ResultPartition(
        ResultPartitionId("0"), JobId("j"), 1, None, ChannelFaultInjector(fault, 0, marker)
    )
    p.add(0, DataBundle("b0", 1))
    p.broadcast(EndOfPartition())
    assert p.poll(0, 0).result(0).sequences == (0, 1)


def test_fault_injection_is_off_by_default_and_a_bad_spec_fails_naming_the_key(
    tmp_path: Path,
) -> None:
    assert ChannelFaultInjector.from_configuration(Configuration(), 0, tmp_path) is None
    key = FlowControlOptions.FAULT_INJECTION.key
    with pytest.raises(ConfigError, match=key):
        ChannelFaultInjector.from_configuration(Configuration({key: "lose:0:0:1"}), 0, tmp_path)
    spec = Configuration({key: "repeat:1:0:3"})
    assert ChannelFaultInjector.from_configuration(spec, 0, tmp_path) is None  # producer 1 only
    injector = ChannelFaultInjector.from_configuration(spec, 1, tmp_path)
    assert injector is not None and injector.fault == ChannelFault("repeat", 1, 0, 3)


def test_the_gate_stops_at_an_ack_request_so_the_ack_is_not_held_by_later_events() -> None:
    producers = Producers(1)
    flow_controlled(producers, interval=2)
    acks = Acks()
    gate = InputGate(producers.channels, producers.poll, ack=acks)
    p = producers.partitions[0]
    for name in ("a", "b", "c", "d"):  # a b AckRequest c d AckRequest
        p.add(0, DataBundle(name, 1))
    assert gate.poll_next(1.0) == [(0, DataBundle("a", 1)), (0, DataBundle("b", 1))]
    assert gate.poll_next(1.0) == [(0, DataBundle("c", 1)), (0, DataBundle("d", 1))]
    assert acks.sent == [(0, Ack(p.session_id, 2, 3))]  # sent before c and d were handed over
    gate.poll_next(0.01)
    assert acks.sent[1] == (0, Ack(p.session_id, 5, 6))
