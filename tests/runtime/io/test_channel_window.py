"""Seed 001's flow control, producer end: the window's accounting (pure), a ResultPartition
putting AckRequests in and waking its producer when the consumers' Acks make room, and the
producer's loss counter (``ChannelWindow.lost``, ``ResultPartition.lost_events``): exactly the
events an Ack reports missing under each injected channel fault."""

from __future__ import annotations

import pytest

from millrace.config import Configuration, FlowControlOptions
from millrace.errors import ConfigError, MessageLossError, PartitionNotFoundError
from millrace.runtime.deployment import InputChannelDescriptor
from millrace.runtime.io.channel_fault_injection import ChannelFault, ChannelFaultInjector
from millrace.runtime.io.channel_window import ChannelWindow, FlowControlSettings
from millrace.runtime.io.input_gate import InputGate
from millrace.runtime.io.partition_events import (
    Ack,
    AckRequest,
    CheckpointBarrier,
    DataBundle,
    Watermark,
)
from millrace.runtime.io.result_partition import ResultPartition
from millrace.types import Address, JobId, ResultPartitionId

SESSION = 7


def window(bundles: int = 3, size: int = 1000, interval: int = 2) -> ChannelWindow:
    return ChannelWindow(FlowControlSettings(True, bundles, size, interval), SESSION)


def send(w: ChannelWindow, size_bytes: int = 1) -> int:
    sequence = w.stamp()
    w.on_bundle(sequence, size_bytes)
    return sequence


def test_the_window_fills_at_max_unacked_bundles() -> None:
    w = window(bundles=3)
    for _ in range(3):
        assert w.has_room
        send(w)
    assert not w.has_room and w.unacked_bundles == 3


def test_the_window_fills_at_max_unacked_bytes_but_one_bundle_always_goes() -> None:
    w = window(bundles=10, size=100)
    assert w.has_room
    send(w, size_bytes=500)  # larger than the window: allowed alone
    assert not w.has_room and w.unacked_bytes == 500


def test_an_ack_request_is_due_every_interval_and_when_the_window_fills() -> None:
    w = window(bundles=3, interval=2)
    send(w)
    assert not w.ack_request_due
    send(w)
    assert w.ack_request_due
    w.on_ack_request()
    w.stamp()  # the AckRequest's own number
    send(w)  # third bundle: the window is full, one bundle not covered yet
    assert not w.has_room and w.ack_request_due


def test_an_ack_frees_the_bundles_before_its_request_only() -> None:
    w = window(bundles=4, interval=2)
    send(w, 10)  # 0
    send(w, 20)  # 1
    request = w.stamp()  # 2: AckRequest
    w.on_ack_request()
    send(w, 40)  # 3
    assert w.on_ack(Ack(SESSION, request, request + 1))
    assert w.unacked_bundles == 1 and w.unacked_bytes == 40 and w.acked == request


def test_stale_and_old_acks_are_ignored() -> None:
    w = window()
    send(w)
    send(w)
    assert not w.on_ack(Ack(SESSION + 1, 5, 6))  # another session's
    assert w.on_ack(Ack(SESSION, 2, 3))
    assert not w.on_ack(Ack(SESSION, 1, 2))  # older than the latest
    assert w.unacked_bundles == 0


def test_a_repeated_ack_is_ignored_and_a_new_window_has_none() -> None:
    """An Ack of the latest acknowledged sequence again (a consumer answering one AckRequest
    twice) is not newer: ignored. A new window has acknowledged nothing yet (-1)."""
    w = window()
    assert w.acked == -1 and "acked=-1" in repr(w)
    send(w)
    send(w)
    request = w.stamp()
    assert w.on_ack(Ack(SESSION, request, request + 1))
    assert not w.on_ack(Ack(SESSION, request, request + 1))
    assert w.acked == request and w.unacked_bundles == 0


def test_an_ack_reporting_fewer_events_than_sent_counts_them_lost() -> None:
    w = window()
    send(w)
    send(w)
    w.on_ack(Ack(SESSION, 2, 2))
    assert w.lost == 1


def test_with_flow_control_off_there_is_always_room_and_no_request() -> None:
    w = ChannelWindow(FlowControlSettings(enabled=False, max_unacked_bundles=1), SESSION)
    for _ in range(100):
        send(w, 10**9)
    assert w.has_room and not w.ack_request_due


def test_settings_come_from_the_keys_and_a_bad_interval_fails_naming_it() -> None:
    conf = Configuration({FlowControlOptions.MAX_UNACKED_BUNDLES.key: 5})
    assert FlowControlSettings.from_configuration(conf).max_unacked_bundles == 5
    bad = Configuration(
        {
            FlowControlOptions.MAX_UNACKED_BUNDLES.key: 2,
            FlowControlOptions.ACK_REQUEST_INTERVAL.key: 3,
        }
    )
    with pytest.raises(ConfigError, match="ack-request-interval"):
        bad.validate()
    with pytest.raises(ConfigError, match="max-unacked-bytes"):
        Configuration({FlowControlOptions.MAX_UNACKED_BYTES.key: "0 b"}).validate()


def test_settings_read_each_of_the_four_keys() -> None:
    """Every key set to a value other than its default ends up in its own field."""
    conf = Configuration(
        {
            FlowControlOptions.ENABLED.key: False,
            FlowControlOptions.MAX_UNACKED_BUNDLES.key: 9,
            FlowControlOptions.MAX_UNACKED_BYTES.key: "3 mb",
            FlowControlOptions.ACK_REQUEST_INTERVAL.key: 7,
        }
    )
    assert FlowControlSettings.from_configuration(conf) == FlowControlSettings(
        enabled=False,
        max_unacked_bundles=9,
        max_unacked_bytes=3 * 1024 * 1024,
        ack_request_interval=7,
    )
    assert FlowControlSettings.from_configuration(Configuration()) == FlowControlSettings()


def partition(bundles: int = 2, interval: int = 1) -> ResultPartition:
    settings = FlowControlSettings(True, bundles, 10**9, interval)
    return ResultPartition(ResultPartitionId("p"), JobId("j"), 2, settings)


def test_a_partition_puts_ack_requests_in_and_wakes_the_producer_on_the_ack() -> None:
    p = partition(bundles=2, interval=1)
    p.add(0, DataBundle("a", 1))
    p.add(0, DataBundle("b", 1))
    reply = p.poll(0, 0).result(0)
    assert reply.events == (DataBundle("a", 1), AckRequest(), DataBundle("b", 1), AckRequest())
    assert reply.sequences == (0, 1, 2, 3)
    room = p.wait_for_room()
    assert not room.done()  # channel 0 is full; channel 1 is not enough
    p.acknowledge(0, Ack(p.session_id, 1, 2))  # the first request: one bundle freed
    assert room.result(0) is None
    assert p.has_room


def test_barriers_and_watermarks_go_out_whatever_the_window() -> None:
    p = partition(bundles=1)
    p.add(0, DataBundle("a", 1))
    assert not p.has_room
    p.add(0, CheckpointBarrier(1, 0))
    p.add(0, Watermark(5))
    events = p.poll(0, 0).result(0).events
    assert events[-2:] == (CheckpointBarrier(1, 0), Watermark(5))


def test_releasing_a_partition_fails_the_producer_s_wait_for_room() -> None:
    p = partition(bundles=1)
    p.add(1, DataBundle("a", 1))
    room = p.wait_for_room()
    p.release("job cancelled")
    with pytest.raises(PartitionNotFoundError, match="job cancelled"):
        room.result(0)


def test_a_repeated_ack_request_frees_a_window_whose_ack_was_lost() -> None:
    p = partition(bundles=1, interval=1)
    p.add(0, DataBundle("a", 1))  # the window is full; its AckRequest is event 1
    room = p.wait_for_room()
    # the consumer's Ack of request 1 is lost with its connection: nothing frees the window
    p.request_acks()  # the producer, having waited, asks again
    events = p.poll(0, 0).result(0)
    assert events.events == (DataBundle("a", 1), AckRequest(), AckRequest())
    assert events.sequences == (0, 1, 2)
    assert not p.poll(1, 0).done()  # channel 1 has room: nothing put in, its pull parks
    p.acknowledge(0, Ack(p.session_id, 2, 3))  # the answer to the repeated request
    assert room.result(0) is None and p.has_room
    p.acknowledge(0, Ack(p.session_id, 1, 2))  # the lost one, late: ignored
    assert p.has_room


def gearpump_consumer(partition: ResultPartition) -> tuple[list[int], int]:
    """Read channel 0 of ``partition`` as Gearpump's receiver does (no sequence check): count
    the events of the partition's session as they arrive and answer every AckRequest with an
    Ack carrying that count. Returns the largest number of events missing at any Ack, found
    independently of the count: the sequence numbers sent up to the AckRequest that have not
    arrived with its session by then."""
    reply = partition.poll(0, 0).result(0)
    arrived: set[int] = set()
    received = 0
    missing_at_acks: list[int] = []
    stamps = zip(reply.events, reply.session_ids, reply.sequences, strict=True)
    for event, session_id, sequence in stamps:
        if session_id != partition.session_id:
            continue  # a stale attempt's event: not of this session
        received += 1
        arrived.add(sequence)
        if isinstance(event, AckRequest):
            missing_at_acks.append(len(set(range(sequence + 1)) - arrived))
            partition.acknowledge(0, Ack(session_id, sequence, received))
    return missing_at_acks, max(missing_at_acks)


@pytest.mark.parametrize(
    ("kind", "bundle", "lost"),
    [
        ("drop", 1, 1),  # never delivered
        ("stale", 1, 1),  # delivered with another session: not this session's
        ("repeat", 1, 0),  # delivered twice: nothing missing
        ("delay", 1, 0),  # overtaken by the next bundle: there before the AckRequest
        ("delay", 3, 1),  # overtaken by the AckRequest: missing when it is answered
    ],
)
def test_the_loss_counter_counts_the_events_an_ack_reports_missing(
    tmp_path, kind: str, bundle: int, lost: int
) -> None:
    """The producer's ``lost`` is the most events any Ack of the channel reported missing
    (Gearpump's AckRequest/Ack loss check), under each fault the test-only injection makes:
    real partition, real injector, and the Acks a counting consumer sends."""
    faults = ChannelFaultInjector(ChannelFault(kind, 0, 0, bundle), 0, tmp_path / "marker")
    settings = FlowControlSettings(True, 16, 10**9, 4)
    p = ResultPartition(ResultPartitionId("p"), JobId("j"), 1, settings, faults)
    for i in range(8):  # an AckRequest after the 4th and the 8th bundle
        p.add(0, DataBundle(f"b{i}", 1))
    missing_at_acks, most = gearpump_consumer(p)
    assert len(missing_at_acks) == 2
    assert most == lost
    assert p.windows[0].lost == most
    assert p.lost_events == most


@pytest.mark.parametrize(("kind", "bundle"), [("drop", 1), ("stale", 1), ("delay", 3)])
def test_a_real_consumer_fails_on_the_loss_before_it_acknowledges_it(
    tmp_path, kind: str, bundle: int
) -> None:
    """The consumer's InputGate checks every event's sequence: it fails with MessageLossError
    at the first missing event, before the AckRequest after it is answered, so no Ack of a
    real consumer reports a loss (the producer's counter stays 0, the job recovers through
    the consumer's failure)."""
    faults = ChannelFaultInjector(ChannelFault(kind, 0, 0, bundle), 0, tmp_path / "marker")
    settings = FlowControlSettings(True, 16, 10**9, 4)
    p = ResultPartition(ResultPartitionId("p"), JobId("j"), 1, settings, faults)
    for i in range(8):
        p.add(0, DataBundle(f"b{i}", 1))
    acks: list[Ack] = []
    channel = InputChannelDescriptor(ResultPartitionId("p"), 0, Address("local://t/te"), 0)
    gate = InputGate([channel], lambda c, index: p.poll(0, index), ack=lambda c, a: acks.append(a))
    with pytest.raises(MessageLossError):
        for _ in range(20):
            gate.poll_next(0)
    assert acks == []  # the AckRequest after the missing event is never answered
