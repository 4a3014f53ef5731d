"""Properties of the InputGate's watermark (Flink's StatusWatermarkValve), for any interleaving
of watermarks, idleness changes and ends of partition over any number of channels: it never
goes back; it is the minimum over the active channels' watermarks, or when every channel is idle
the largest of them; once every channel ended it is MAX. The gate is driven event by event by
a poll function whose replies the test completes itself."""

from __future__ import annotations

from concurrent.futures import Future

from hypothesis import given
from hypothesis import strategies as st

from millrace.runtime.deployment import InputChannelDescriptor
from millrace.runtime.io.input_gate import InputGate
from millrace.runtime.io.partition_events import (
    MAX_WATERMARK,
    MIN_WATERMARK,
    EndOfPartition,
    PartitionEvent,
    PartitionEvents,
    Watermark,
    WatermarkStatus,
)
from millrace.types import Address, ResultPartitionId


class ScriptedChannels:
    """The producers: one outstanding pull per channel, answered when the test says."""

    def __init__(self, channels: int) -> None:
        self.pulls: dict[int, tuple[int, Future[PartitionEvents]]] = {}
        self.descriptors = [
            InputChannelDescriptor(ResultPartitionId(f"p{i}"), 0, Address("local://t/te"), i)
            for i in range(channels)
        ]

    def poll(self, channel: InputChannelDescriptor, from_index: int) -> Future[PartitionEvents]:
        future: Future[PartitionEvents] = Future()
        self.pulls[channel.producer_index] = (from_index, future)
        return future

    def feed(self, gate: InputGate, channel: int, event: PartitionEvent) -> None:
        """Answer ``channel``'s pull with ``event`` and let the gate take it."""
        if channel not in self.pulls:  # the gate pulls again on its next turn
            assert gate.poll_next(0) == []
        from_index, future = self.pulls.pop(channel)
        future.set_result(PartitionEvents(from_index, (event,)))
        gate.poll_next(0)


class Model:
    """What the gate's watermark must be, from the events alone."""

    def __init__(self, channels: int) -> None:
        self.watermarks = [MIN_WATERMARK] * channels
        self.idle = [False] * channels
        self.watermark = MIN_WATERMARK

    def accept(self, channel: int, event: PartitionEvent) -> None:
        if isinstance(event, Watermark):
            self.watermarks[channel] = max(self.watermarks[channel], event.timestamp_ms)
        elif isinstance(event, WatermarkStatus):
            self.idle[channel] = not event.active
        elif isinstance(event, EndOfPartition):
            self.watermarks[channel], self.idle[channel] = MAX_WATERMARK, False
        active = [w for w, idle in zip(self.watermarks, self.idle, strict=True) if not idle]
        self.watermark = max(self.watermark, min(active) if active else max(self.watermarks))


events = st.one_of(
    st.builds(Watermark, st.integers(0, 10_000)),
    st.builds(WatermarkStatus, st.booleans()),
)


@st.composite
def scripts(draw: st.DrawFn) -> tuple[int, list[tuple[int, PartitionEvent]]]:
    channels = draw(st.integers(1, 5))
    steps = draw(st.lists(st.tuples(st.integers(0, channels - 1), events), max_size=60))
    ends = draw(st.permutations(range(channels)))
    return channels, [*steps, *[(c, EndOfPartition()) for c in ends]]


@given(scripts())
def test_the_watermark_is_the_minimum_over_active_channels_and_never_goes_back(
    script: tuple[int, list[tuple[int, PartitionEvent]]],
) -> None:
    channels, steps = script
    producers = ScriptedChannels(channels)
    gate = InputGate(producers.descriptors, producers.poll)
    model = Model(channels)
    assert gate.poll_next(0) == [] and gate.watermark == MIN_WATERMARK
    ended: set[int] = set()
    previous = gate.watermark
    for channel, event in steps:
        if channel in ended:
            continue
        producers.feed(gate, channel, event)
        model.accept(channel, event)
        if isinstance(event, EndOfPartition):
            ended.add(channel)
        assert gate.watermark >= previous, "the watermark went back"
        assert gate.watermark == model.watermark
        previous = gate.watermark
    assert gate.finished and gate.watermark == MAX_WATERMARK


@given(st.integers(1, 5), st.lists(st.tuples(st.integers(0, 4), st.integers(0, 10_000))))
def test_without_idleness_the_watermark_is_the_smallest_channel_watermark(
    channels: int, marks: list[tuple[int, int]]
) -> None:
    producers = ScriptedChannels(channels)
    gate = InputGate(producers.descriptors, producers.poll)
    gate.poll_next(0)
    latest = [MIN_WATERMARK] * channels
    for channel, timestamp in marks:
        channel %= channels
        producers.feed(gate, channel, Watermark(timestamp))
        latest[channel] = max(latest[channel], timestamp)
        assert gate.watermark == min(latest)


@given(st.integers(2, 5), st.lists(st.integers(0, 10_000), min_size=5, max_size=5))
def test_when_every_channel_is_idle_the_largest_watermark_is_released(
    channels: int, timestamps: list[int]
) -> None:
    producers = ScriptedChannels(channels)
    gate = InputGate(producers.descriptors, producers.poll)
    gate.poll_next(0)
    for channel in range(channels):
        producers.feed(gate, channel, Watermark(timestamps[channel]))
    assert gate.watermark == min(timestamps[:channels])
    for channel in range(channels):
        producers.feed(gate, channel, WatermarkStatus(False))
    assert gate.watermark == max(timestamps[:channels])
