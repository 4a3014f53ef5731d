"""Properties of tumbling event-time window assignment (Flink's
TimeWindow.getWindowStartWithOffset), for any size, offset and timestamp, before the epoch too:
the window holds the timestamp, starts on the offset grid, and neighbouring timestamps share a
window exactly when no window boundary lies between them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from millrace.api.windows import TumblingEventTimeWindows

DAY_MS = 86_400_000
timestamps = st.integers(-(10**13), 10**13)  # about 1653 to 2286


@st.composite
def windows(draw: st.DrawFn) -> TumblingEventTimeWindows:
    size = draw(st.integers(1, 400 * DAY_MS))
    return TumblingEventTimeWindows(size, draw(st.integers(0, size - 1)))


@given(windows(), timestamps)
def test_the_window_of_a_timestamp_holds_it_and_starts_on_the_grid(
    window: TumblingEventTimeWindows, timestamp: int
) -> None:
    start = window.window_start_ms(timestamp)
    assert start <= timestamp < start + window.size_ms
    assert (start - window.offset_ms) % window.size_ms == 0


@given(windows(), timestamps, st.integers(0, 10 * DAY_MS))
def test_two_timestamps_share_a_window_when_no_boundary_lies_between(
    window: TumblingEventTimeWindows, first: int, gap: int
) -> None:
    second = first + gap
    next_boundary = window.window_start_ms(first) + window.size_ms
    same = window.window_start_ms(first) == window.window_start_ms(second)
    assert same == (second < next_boundary)


@given(windows(), timestamps)
def test_a_window_start_is_its_own_window_start(
    window: TumblingEventTimeWindows, timestamp: int
) -> None:
    start = window.window_start_ms(timestamp)
    assert window.window_start_ms(start) == start
    assert window.window_start_ms(start - 1) == start - window.size_ms
